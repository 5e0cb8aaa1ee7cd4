"""Blind pre-suggestion through a real browser: an annotator of a blind batch works a HIT
whose clips have stored model suggestions (distinctive words no caption would use) and
none of the model's text reaches the browser: not the served HTML, not any text or JSON
response the page fetched (login, work page, HIT page, heard and video-hint logging,
submit, the next HIT), not the DOM or the caption boxes after playing, unlocking, typing
and opening the video hint. The same batch switched to edit mode does put the suggestion
in the box, through the same checks, so the checks can see a leak when there is one.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, Response, expect

from active.models import Presuggestion
from active.services import batch_configure
from annotation.models import Assignment, Batch, Caption
from core.models import Project
from tests.active.conftest import suggest
from tests.browser.conftest import CHROMIUM, CHROMIUM_MISSING
from tests.browser.test_annotator import GOOD, _street
from tests.browser.test_roles import TIMEOUT_MS, log_in
from tests.modeling.factories import make_run, ready_snapshot

if not CHROMIUM.exists():
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

pytestmark = pytest.mark.browser

# The best caption and the other beam hypotheses; every word is one no annotator types.
SUGGESTION = "a quokka zithers beside a xylophonic zeppelin"
RUNNER_UP = "an okapi yodels under a marimbaphone"
MARKERS = ("quokka", "zither", "xylophonic", "zeppelin", "okapi", "yodel", "marimbaphone")
TEXTUAL = ("text/", "json", "javascript", "xml")


class Wiretap:
    """The text of every text or JSON response the page receives, read as it arrives (a
    body is gone once the page navigates away)."""

    def __init__(self, page: Page) -> None:
        self.seen: dict[str, str] = {}
        self.count = itertools.count()
        page.on("response", lambda response: self._read(response))

    def _read(self, response: Response) -> None:
        kind = response.headers.get("content-type", "")
        if 300 <= response.status < 400 or not any(t in kind for t in TEXTUAL):
            return  # redirects have no body; audio, video and images carry no text
        key = f"{next(self.count)} {response.request.method} {response.url}"
        self.seen[key] = response.text()

    def bodies(self) -> dict[str, str]:
        return dict(self.seen)


def leaks(page: Page, tap: Wiretap) -> dict[str, list[str]]:
    """Where the model's words show up: the served HTML, each text response, the live DOM
    (markup and rendered text), the caption boxes' values and the page's storage."""
    places = {"html": page.content()} | tap.bodies()
    places["dom"] = page.evaluate("() => document.documentElement.outerHTML")
    places["text"] = page.evaluate("() => document.body.innerText")
    places["boxes"] = " | ".join(
        page.locator("textarea").evaluate_all("boxes => boxes.map(b => b.value)")
    )
    places["storage"] = page.evaluate(
        "() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage)"
    )
    found = {where: [m for m in MARKERS if m in body.lower()] for where, body in places.items()}
    return {where: words for where, words in found.items() if words}


@pytest.fixture
def suggested(project: Project, settings: Any, tmp_path: Path) -> Batch:
    """Two playable one-clip HITs with word and video hints, each clip with a suggestion
    (and a runner-up hypothesis) from the project's promoted run."""
    settings.MEDIA_ROOT = tmp_path / "media"
    batch = _street(project, tmp_path, clips_per_hit=1)
    run = make_run(project, ready_snapshot(project), promoted_at=timezone.now())
    for hit in batch.hits.all():
        for hit_clip in hit.hit_clips.all():
            suggest(run, hit_clip.clip, SUGGESTION, entropy=0.3, beam=[(RUNNER_UP, -0.9)])
    return batch


def test_a_blind_batch_keeps_model_text_out_of_the_browser(
    page: Page, live_server: Any, suggested: Batch, alice: Any, ann: Any
) -> None:
    site = live_server.url
    page.set_default_timeout(TIMEOUT_MS)
    batch_configure(batch=suggested, user=alice, strategy="uncertainty", presuggest="blind")
    tap = Wiretap(page)
    log_in(page, site, "ann")
    page.goto(f"{site}/work/")
    page.get_by_role("button", name="Start working").click()
    first = Assignment.objects.get(worker=ann)
    expect(page).to_have_url(f"{site}{first.get_absolute_url()}")
    box = page.get_by_label("Your caption for clip 1")
    expect(box).to_have_attribute("readonly", "")
    expect(box).to_have_value("")
    assert leaks(page, tap) == {}

    # open the video hint, play to the end, unlock the box: still nothing of the model
    page.get_by_role("button", name="Unsure? Show video").click()
    expect(page.locator("video[data-video]")).to_be_visible()
    page.locator("canvas.wave").focus()
    page.keyboard.press("Space")
    expect(page.locator("[data-heard-state]")).to_have_text("Heard in full", timeout=15_000)
    expect(box).not_to_have_attribute("readonly", "")
    expect(box).to_have_value("")
    assert leaks(page, tap) == {}

    # type and submit; the next HIT is blind too
    page.keyboard.type(GOOD)
    page.keyboard.press("Control+Enter")
    expect(page.get_by_role("status")).to_contain_text("Submitted. Thank you!")
    second = Assignment.objects.filter(worker=ann).exclude(pk=first.pk).get()
    expect(page).to_have_url(f"{site}{second.get_absolute_url()}")
    expect(page.get_by_label("Your caption for clip 1")).to_have_value("")
    read = " ".join(tap.bodies())
    for url in (first.get_absolute_url(), second.get_absolute_url(), "/heard", "/video-hint"):
        assert url in read  # both HIT pages and the JSON of the logging calls were read
    assert leaks(page, tap) == {}
    assert Caption.objects.get(assignment=first).text == GOOD
    assert not Presuggestion.objects.exists()

    # the same batch in edit mode: the box starts from the suggestion, and the checks above
    # find it in the served page, its response and the box
    batch_configure(batch=suggested, user=alice, strategy="uncertainty", presuggest="edit")
    page.reload()
    box = page.get_by_label("Your caption for clip 1")
    expect(box).to_have_value(SUGGESTION)
    found = leaks(page, tap)
    assert {"html", "dom", "boxes"} <= set(found)
    assert found["boxes"] == ["quokka", "zither", "xylophonic", "zeppelin"]
    assert any(second.get_absolute_url() in place for place in found)
    assert Presuggestion.objects.get(assignment=second).text == SUGGESTION
