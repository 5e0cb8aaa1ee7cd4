"""Accessibility through a real browser: axe-core over every page of the seeded demo for
every login (and the login page), and the pages workers and reviewers use on a phone.

Every page: the pages demo.pages finds by following links as that login (the HIT page
too: the annotator holds a HIT first), each checked by axe-core (tests/browser/axe.py)
with no critical or serious violation and no empty table header. Swagger (/api/docs) is
not Earmark's markup and is not crawled.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Browser, Page

from annotation.models import Assignment
from annotation.services import hit_claim
from core.models import Project
from demo.pages import demo_pages
from demo.services import DEMO_PASSWORD, DEMO_USERS
from tests.annotation.factories import make_clips, make_subset, publish
from tests.browser.axe import axe_violations
from tests.browser.conftest import CHROMIUM, CHROMIUM_MISSING
from tests.browser.test_reviewer import submitted  # noqa: F401  (a fixture)
from tests.browser.test_roles import TIMEOUT_MS, log_in
from tests.conftest import PASSWORD

if not CHROMIUM.exists():
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

pytestmark = pytest.mark.browser

PHONE = {"width": 375, "height": 740}
# minor in axe's scale, but a header a screen reader reads as nothing is what the issue names
ALSO = ("empty-table-header",)


def _pages_of(username: str | None) -> list[str]:
    client = Client(raise_request_exception=False)
    if username is None:
        return demo_pages(client=client, start=["/login/"])
    client.force_login(User.objects.get(username=username))
    return demo_pages(client=client, start=["/", "/work/"])


def _browser_page(
    browser: Browser, site: str, username: str | None, password: str = PASSWORD, **context: Any
) -> Page:
    page = browser.new_context(**context).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    if username is not None:
        log_in(page, site, username, password)
    return page


def _violations(page: Page) -> list[str]:
    blocking = axe_violations(page)
    other = axe_violations(page, impacts=("moderate", "minor"))
    return blocking + [line for line in other if line.startswith(ALSO)]


def test_every_demo_page_passes_axe_for_every_login(
    browser: Browser, live_server: Any, demo: Project
) -> None:
    annotator = User.objects.get(username="annotator")
    held = hit_claim(worker=annotator)
    assert held is not None
    site = live_server.url
    found: dict[str, list[str]] = {}
    seen = 0
    for username in (None, *DEMO_USERS):
        page = _browser_page(browser, site, username, DEMO_PASSWORD)
        paths = _pages_of(username)
        seen += len(paths)
        for path in paths:
            page.goto(f"{site}{path}")
            for line in _violations(page):
                found.setdefault(line, []).append(f"{username or 'anonymous'} {path}")
        page.context.close()

    assert held.get_absolute_url() in _pages_of("annotator")
    assert seen > 60  # the crawl reached the project's pages, not just the home page
    report = [f"{line}\n    on {', '.join(where)}" for line, where in found.items()]
    assert not found, "\n".join(report)


def test_the_review_page_fits_a_phone(
    browser: Browser,
    live_server: Any,
    submitted: list[Assignment],  # noqa: F811
) -> None:
    page = _browser_page(browser, live_server.url, "rey", viewport=PHONE)
    page.goto(f"{live_server.url}/projects/sounds/review/")

    assert page.get_by_test_id("review-card").count() == len(submitted)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_the_hit_page_fits_a_phone(browser: Browser, live_server: Any, project: Project) -> None:
    publish(make_subset(project, make_clips(2)), captions_per_clip=1, clips_per_hit=2)
    assignment = hit_claim(worker=User.objects.get(username="ann"), now=timezone.now())
    assert assignment is not None
    page = _browser_page(browser, live_server.url, "ann", viewport=PHONE)
    page.goto(f"{live_server.url}{assignment.get_absolute_url()}")

    assert page.get_by_role("textbox").count() == 2
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
