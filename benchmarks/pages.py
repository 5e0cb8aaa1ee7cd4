"""What every page of the demo costs, for each login: the server's time to answer (Django's
test client in this process: middleware, views, queries, templates; the first request of a
page and the median of the next ones) and, in Chromium against `manage.py runserver`, the
time to first byte and to the load event (every image, style and script of the page in).
Prints one row per page and the slowest pages last.

Usage: .venv/bin/python benchmarks/pages.py [--var DIR] [--repeat 5] [--no-browser]

The pages are what demo.pages finds by following links as each login (the login page
logged out); the HIT page is in it because the annotator holds a HIT first. --var reuses a
var dir already holding the seeded demo (EARMARK_VAR_DIR of a `bin/earmark up`); without it
the demo is seeded into a fresh one (`seed_demo`, then its queued training run, as the gpu
worker would: a few minutes). /api/docs (Swagger UI) is timed for the researcher too; its
"load" is when Swagger UI has drawn the schema it fetched, after the load event.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PASSWORD_FIELD = "Password"


def _setup(var: Path | None) -> Path:
    if var is None:
        var = Path(tempfile.mkdtemp(prefix="earmark-bench-pages-"))
    os.environ["EARMARK_VAR_DIR"] = str(var)
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "earmark.settings")
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return var


def _seed() -> None:
    """The demo, seeded and trained, unless the var dir holds it already."""
    from core.jobs import job_kind
    from core.models import Job
    from core.services import job_run
    from demo.services import demo_seed

    demo_seed()
    for job in Job.objects.filter(state=Job.State.QUEUED).order_by("pk"):
        if job_kind(job.kind).queue == "gpu":
            job_run(job_id=job.pk)
    for job in Job.objects.filter(state=Job.State.QUEUED, kind="active_suggest"):
        job_run(job_id=job.pk)


def _logins() -> list[str | None]:
    from demo.services import DEMO_USERS

    return [None, *DEMO_USERS]


def _client(username: str | None) -> Any:
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client(raise_request_exception=False, HTTP_HOST="localhost")
    if username is not None:
        client.force_login(get_user_model().objects.get(username=username))
    return client


def _hold_a_hit() -> None:
    from django.contrib.auth import get_user_model

    from annotation.services import hit_claim

    hit_claim(worker=get_user_model().objects.get(username="annotator"))


def server_times(username: str | None, paths: list[str], repeat: int) -> dict[str, list[float]]:
    """Per path: the first request's milliseconds, then `repeat` more."""
    client = _client(username)
    times: dict[str, list[float]] = {}
    for path in paths:
        runs = []
        for _ in range(repeat + 1):
            start = time.perf_counter()
            response = client.get(path)
            runs.append((time.perf_counter() - start) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"{username} {path}: {response.status_code}")
        times[path] = runs
    return times


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def browser_times(pages: dict[str | None, list[str]]) -> dict[tuple[str | None, str], tuple]:
    """(login, path) -> (TTFB ms, load event ms) of a first visit in Chromium (a fresh
    browser context per login: nothing cached from another login's visits)."""
    from playwright.sync_api import sync_playwright

    from demo.services import DEMO_PASSWORD

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env={**os.environ, "ALLOWED_HOSTS": "127.0.0.1,localhost"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    site = f"http://127.0.0.1:{port}"
    out: dict[tuple[str | None, str], tuple] = {}
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.2)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
            )
            for username, paths in pages.items():
                page = browser.new_context().new_page()
                page.set_default_timeout(60_000)
                if username is not None:
                    page.goto(f"{site}/login/")
                    page.get_by_label("Username").fill(username)
                    page.get_by_label(PASSWORD_FIELD).fill(DEMO_PASSWORD)
                    page.get_by_role("button", name="Log in").click()
                    page.wait_for_load_state("load")
                for path in paths:
                    page.goto(f"{site}{path}", wait_until="load")
                    timing = page.evaluate(
                        "() => { const t = performance.getEntriesByType('navigation')[0];"
                        " return [t.responseStart, t.loadEventEnd || performance.now()]; }"
                    )
                    if path == "/api/docs":  # rendered: Swagger UI drew the fetched schema
                        page.wait_for_selector(".swagger-ui .info .title")
                        timing[1] = page.evaluate("() => performance.now()")
                    out[(username, path)] = (timing[0], timing[1])
                page.context.close()
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--var", type=Path, help="a var dir holding the seeded demo")
    parser.add_argument("--repeat", type=int, default=5, help="warm requests per page")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--slowest", type=int, default=10)
    args = parser.parse_args()
    var = _setup(args.var)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}; var dir {var}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    _seed()
    _hold_a_hit()
    from demo.pages import demo_pages

    pages: dict[str | None, list[str]] = {}
    for username in _logins():
        start = ["/login/"] if username is None else ["/", "/work/"]
        pages[username] = demo_pages(client=_client(username), start=start)
    pages["researcher"] = [*pages["researcher"], "/api/docs"]
    rows: list[list[Any]] = []
    for username, paths in pages.items():
        for path, runs in server_times(username, paths, args.repeat).items():
            rows.append([username or "anonymous", path, runs[0], statistics.median(runs[1:])])
    if not args.no_browser:
        loads = browser_times(pages)
        for row in rows:
            username = None if row[0] == "anonymous" else row[0]
            row.extend(loads[(username, row[1])])
    print(f"{len(rows)} pages; server ms: first request, median of {args.repeat} more; "
          f"browser ms (first visit): time to first byte, load event")  # fmt: skip
    header = f"{'login':11s} {'page':58s} {'first':>7s} {'median':>7s}"
    header += "" if args.no_browser else f" {'TTFB':>7s} {'load':>7s}"
    print(header)
    for row in rows:
        print(f"{row[0]:11s} {row[1][:58]:58s} " + " ".join(f"{v:7.0f}" for v in row[2:]))
    key = 5 if not args.no_browser else 2
    print(f"\nslowest {args.slowest} by {'load event' if key == 5 else 'first request'}:")
    for row in sorted(rows, key=lambda r: r[key], reverse=True)[: args.slowest]:
        print(f"{row[0]:11s} {row[1][:58]:58s} " + " ".join(f"{v:7.0f}" for v in row[2:]))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
