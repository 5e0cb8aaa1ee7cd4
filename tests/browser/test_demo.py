"""The seeded demo through a real browser: each demo login's main screen has the seeded
work in it. The test seeds the demo (fewer SynthScenes), then runs the training it queued
through the job runner, as the gpu worker of `bin/earmark up` would. Screenshots go to
pytest-playwright's output folder (test-results/ by default).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Browser, Dialog, Page, expect

from core.models import Project
from demo.services import DEMO_PASSWORD, HOSTILE_SUFFIX, OFF_TOPIC, QUALIFICATION
from modeling.models import Suggestion
from tests.browser.conftest import CHROMIUM, CHROMIUM_MISSING
from tests.browser.test_roles import TIMEOUT_MS, log_in
from tests.demo.conftest import (
    SYNTHSCENES,
)

if not CHROMIUM.exists():
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

pytestmark = pytest.mark.browser


def _page_as(browser: Browser, site: str, username: str, dialogs: list[str]) -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
    page.set_default_timeout(TIMEOUT_MS)

    def refuse(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    log_in(page, site, username, DEMO_PASSWORD)
    return page


def test_every_demo_login_finds_its_main_screen_lived_in(
    browser: Browser, live_server: Any, demo: Project, output_path: str
) -> None:
    site, slug = live_server.url, demo.slug
    dialogs: list[str] = []

    # the reviewer: four captions waiting, the off-topic one flagged first with its evidence,
    # the hostile-looking one shown exactly as typed (escaped, nothing runs)
    reviewer = _page_as(browser, site, "reviewer", dialogs)
    reviewer.goto(f"{site}/projects/{slug}/review/")
    cards = reviewer.get_by_test_id("review-card")
    expect(cards).to_have_count(4)
    expect(cards.nth(0).get_by_test_id("caption-text")).to_have_text(OFF_TOPIC)
    flags = cards.nth(0).get_by_test_id("flag")
    expect(flags).to_have_count(2)
    hints = flags.filter(has_text="Mentions none of the clip's word hints")
    expect(hints.get_by_test_id("flag-evidence")).to_contain_text("dog")
    expect(flags.filter(has_text="Disagrees with the clip's other captions")).to_have_count(1)
    hostile = reviewer.get_by_test_id("caption-text").filter(has_text="alert(1)")
    expect(hostile).to_have_count(1)
    expect(hostile).to_contain_text(HOSTILE_SUFFIX)
    expect(hostile.locator("script")).to_have_count(0)
    # the promoted run's suggestion sits beside the caption when the model was confident
    # enough of it (SUGGESTION_MIN_CONFIDENCE), with its confidence
    shown = cards.nth(0).get_by_test_id("model-suggestion")
    suggestion = Suggestion.objects.get(
        run__promoted_at__isnull=False, clip__captions__text=OFF_TOPIC
    )
    if suggestion.confidence >= settings.SUGGESTION_MIN_CONFIDENCE:
        expect(shown.get_by_test_id("suggestion-confidence")).to_contain_text("% confident")
    else:
        expect(shown).to_have_count(0)
    reviewer.screenshot(path=f"{output_path}/demo-review-queue.png", full_page=True)
    reviewer.goto(f"{site}/projects/{slug}/qualifications/")
    expect(reviewer.get_by_role("main")).to_contain_text(QUALIFICATION)

    # the researcher: one finished run with scores, suggesting; suggestions and the
    # learning curve on the active-learning pages; snapshots v1 and v2
    researcher = _page_as(browser, site, "researcher", dialogs)
    researcher.goto(f"{site}/projects/{slug}/runs/")
    rows = researcher.get_by_test_id("leaderboard").locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("tempatt")
    expect(rows.first).to_contain_text("suggesting")
    expect(rows.first.locator("td").nth(3)).to_have_text(re.compile(r"^\d\.\d{3}$"))
    researcher.screenshot(path=f"{output_path}/demo-runs.png", full_page=True)
    researcher.goto(f"{site}/projects/{slug}/active/")
    expect(researcher.get_by_test_id("promoted")).to_contain_text("tempatt")
    suggestions = researcher.get_by_test_id("suggestions").locator("tbody tr")
    expect(suggestions).to_have_count(6 + sum(SYNTHSCENES.values()))  # one per clip
    expect(suggestions.first.locator("td").nth(1)).not_to_be_empty()
    researcher.screenshot(path=f"{output_path}/demo-active.png", full_page=True)
    researcher.goto(f"{site}/projects/{slug}/active/curve/")
    expect(researcher.get_by_test_id("curve-chart")).to_be_visible()
    expect(researcher.get_by_test_id("curve-series")).to_have_count(1)
    researcher.goto(f"{site}/projects/{slug}/snapshots/")
    snapshots = researcher.get_by_test_id("snapshots")
    expect(snapshots.get_by_role("link", name="v1", exact=True)).to_be_visible()
    expect(snapshots.get_by_role("link", name="v2", exact=True)).to_be_visible()
    researcher.goto(f"{site}/projects/{slug}/snapshots/1/")
    expect(researcher.get_by_test_id("state")).to_have_text("Ready")
    expect(researcher.get_by_role("heading", name="Statistics")).to_be_visible()
    researcher.screenshot(path=f"{output_path}/demo-snapshot.png", full_page=True)

    # the annotators: HITs to take at once; annotator2's test waits for grading
    annotator = _page_as(browser, site, "annotator", dialogs)
    annotator.goto(f"{site}/work/")
    annotator.get_by_role("button", name="Start working").click()
    expect(annotator.get_by_role("heading", level=1)).to_contain_text("Demo")
    annotator2 = _page_as(browser, site, "annotator2", dialogs)
    annotator2.goto(f"{site}/work/qualifications/")
    expect(annotator2.get_by_test_id("my-qualifications")).to_contain_text("Waiting for review")

    assert dialogs == []
