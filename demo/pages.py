"""Every page of the demo a login reaches by following links, found by crawling the site
through Django's test client: what the accessibility browser test and
benchmarks/pages.py visit, so both cover a page as soon as some screen links to it.

A page is one HTML answer to a GET. Files (audio, video, charts, downloads, CSV), the JSON
API, the admin and the Label Studio endpoints are not pages; of the many links to one view
(one run page per run, one caption page per caption) the crawl keeps the first few, which
is what a page's speed and markup depend on.
"""

from __future__ import annotations

from collections import deque
from html.parser import HTMLParser
from urllib.parse import urldefrag, urlsplit

from django.test import Client
from django.urls import Resolver404, resolve

# views whose answers are files or that act on a GET (logging out)
NOT_PAGES = frozenset(
    {
        "logout",
        "healthz",
        "assignment_clip_audio",
        "assignment_clip_heard",
        "assignment_clip_video",
        "assignment_video_hint",
        "clip_audio",
        "clip_video",
        "qualification_clip_audio",
        "mturk_clip_audio",
        "mturk_qualification_audio",
        "subset_chart",
        "corpus_statistics_chart",
        "run_curve",
        "snapshot_download",
        "snapshot_file",
        "ledger_csv",
        "recipe_export",
        "active_batch_labelstudio",
    }
)
NOT_CRAWLED = ("/api/", "/admin/", "/labelstudio/", "/static/", "/media/")
PER_VIEW = 2  # pages kept per view


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def _view_name(path: str) -> str | None:
    """The URL name of a crawlable page at `path`, or None for anything else."""
    if path.startswith(NOT_CRAWLED):
        return None
    try:
        match = resolve(path)
    except Resolver404:
        return None
    name = match.url_name or match.view_name
    return None if name in NOT_PAGES else name


def _same_site_paths(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    paths = []
    for href in parser.hrefs:
        parts = urlsplit(urldefrag(href).url)
        if parts.scheme or parts.netloc or not parts.path.startswith("/"):
            continue  # another site, a fragment, mailto:, or a relative link (none here)
        paths.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    return paths


def demo_pages(
    *,
    client: Client,
    start: list[str],
    limit: int = 300,
    refused: list[str] | None = None,
) -> list[str]:
    """The paths of the pages `client` (logged in or not) reaches from `start`, in the order
    a breadth-first crawl finds them, at most PER_VIEW per view and `limit` in all. Links
    answered with an error (a page linking a login to what it may not open) are appended
    to `refused` as "path: status". Pass a client with raise_request_exception=False."""
    seen: set[str] = set()
    per_view: dict[str, int] = {}
    queue = deque(start)
    pages: list[str] = []
    while queue and len(pages) < limit:
        path = queue.popleft()
        if path in seen:
            continue
        seen.add(path)
        name = _view_name(urlsplit(path).path)
        if name is None or per_view.get(name, 0) >= PER_VIEW:
            continue
        response = client.get(path)
        if response.status_code >= 400 and refused is not None:
            refused.append(f"{path}: {response.status_code}")
        if response.status_code != 200 or not response["Content-Type"].startswith("text/html"):
            continue
        per_view[name] = per_view.get(name, 0) + 1
        pages.append(path)
        queue.extend(_same_site_paths(response.content.decode()))
    return pages
