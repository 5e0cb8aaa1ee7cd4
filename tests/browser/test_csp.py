"""The Content-Security-Policy in a real browser: it is enforced (an injected style
attribute is refused), every page of each role works under it (tests/browser/conftest.py
fails a test on any blocked script, style or host), and the API docs' Swagger UI loads from
this site alone, no CDN."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Request, expect

from core.models import Job, Project
from core.services import job_run_inline
from tests.annotation.factories import make_clips, make_subset, publish
from tests.browser.conftest import CHROMIUM, CHROMIUM_MISSING
from tests.browser.test_roles import TIMEOUT_MS, log_in

if not CHROMIUM.exists():
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

pytestmark = pytest.mark.browser

# links a crawl must not follow: they act, stream files or leave the site's pages
SKIPPED = ("/logout", "/admin/", "/media/", "/audio", "/video", "/download", "/api/")


@pytest.fixture
def site(live_server: Any) -> str:
    return str(live_server.url)


@pytest.fixture(autouse=True)
def _fail_fast(page: Page) -> None:
    page.set_default_timeout(TIMEOUT_MS)
    page.set_default_navigation_timeout(TIMEOUT_MS)


@pytest.fixture
def busy_project(project: Project, alice: Any) -> Project:
    """A project with a published batch and a failed job, so its pages have rows and bars."""
    publish(make_subset(project, make_clips(3)), created_by=alice)
    job = job_run_inline(
        kind="ontology_import", params={"path": "/nonexistent.json"}, project=project
    )
    assert job.state == Job.State.FAILED
    return project


def _crawl(page: Page, site: str, start: str, *, limit: int = 60) -> list[str]:
    """Visits the site's pages reachable from `start` in two clicks; the visited paths."""
    seen: list[str] = []
    frontier = [start]
    for _ in range(2):
        found: list[str] = []
        for path in frontier:
            if path in seen or len(seen) >= limit:
                continue
            seen.append(path)
            response = page.goto(site + path)
            assert response is not None
            assert response.status < 500, f"{path}: {response.status}"
            hrefs = page.eval_on_selector_all(
                "a[href^='/']", "els => els.map(e => e.getAttribute('href'))"
            )
            found += [h.split("#")[0] for h in hrefs if not any(s in h for s in SKIPPED)]
        frontier = found
    return seen


def test_the_policy_refuses_what_the_pages_never_do(
    page: Page, site: str, alice: Any, csp_violations: list[str]
) -> None:
    log_in(page, site, "alice")
    page.evaluate(
        "document.body.insertAdjacentHTML('beforeend', '<p style=\"color: red\">injected</p>')"
    )
    page.evaluate("document.body.setAttribute('onclick', 'window.hacked = true')")
    page.locator("body").click()
    assert page.evaluate("window.hacked === undefined")
    for _ in range(50):  # console messages arrive asynchronously
        if len(csp_violations) >= 2:
            break
        page.wait_for_timeout(100)
    assert any("inline" in v for v in csp_violations), csp_violations
    csp_violations.clear()  # seen as expected


def test_every_page_a_researcher_reaches_works_under_the_policy(
    page: Page, site: str, busy_project: Project
) -> None:
    log_in(page, site, "alice")
    visited = _crawl(page, site, busy_project.get_absolute_url())
    assert len(visited) > 10, visited


def test_every_page_a_reviewer_reaches_works_under_the_policy(
    page: Page, site: str, busy_project: Project
) -> None:
    log_in(page, site, "rey")
    assert len(_crawl(page, site, busy_project.get_absolute_url())) > 3


def test_an_annotators_hit_page_works_under_the_policy(
    page: Page, site: str, busy_project: Project
) -> None:
    log_in(page, site, "ann")
    page.goto(f"{site}/work/")
    page.get_by_role("button", name="Start working").click()
    expect(page.locator("#captions")).to_be_visible()
    _crawl(page, site, "/work/")


def test_the_api_docs_load_swagger_ui_from_this_site_only(page: Page, site: str, db: None) -> None:
    hosts: set[str] = set()

    def on_request(request: Request) -> None:
        hosts.add(urlsplit(request.url).netloc)

    page.on("request", on_request)
    page.goto(f"{site}/api/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Earmark API")
    page.locator(".opblock-tag").first.click()  # tags start folded (earmark/api.py)
    expect(page.locator(".opblock").first).to_be_visible()
    assert hosts == {urlsplit(site).netloc}
