"""The reviewer's day, through a real browser against the live server: reject a caption
with a canned reason from the keyboard (its slot re-opens), fix and approve another, block
the worker, who then sees the block page. Screenshots of the review queue and the block
page go to pytest-playwright's output folder (test-results/ by default).
"""

from __future__ import annotations

import io
import math
import struct
import wave
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from annotation.models import Assignment, Caption, ClipListen, Hit, VideoHintView
from annotation.services import assignment_submit, hit_claim
from core.models import Project
from crowd.models import Block, Review
from crowd.records import flag_create
from curation.models import Clip, Label, WordLabel
from tests.annotation.factories import captions_for, listened, make_clips, make_subset, publish
from tests.browser.conftest import CHROMIUM, CHROMIUM_MISSING
from tests.browser.test_roles import TIMEOUT_MS, log_in

if not CHROMIUM.exists():
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

pytestmark = pytest.mark.browser

CAPTIONS = [
    "a man says hello everyone and welcome to the show",  # transcribes speech: rejected
    "a dog barked while cars pass by",  # wrong tense: fixed, then approved
    "rain falls steadily on a metal roof",
]
FIXED = "a dog barks while cars pass by"


def _wav(seconds: float = 1.0, rate: int = 16_000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        samples = (
            int(8000 * math.sin(2 * math.pi * 440 * n / rate)) for n in range(int(seconds * rate))
        )
        out.writeframes(b"".join(struct.pack("<h", s) for s in samples))
    return buffer.getvalue()


def _hints(clip: Clip, *words: tuple[str, str, str]) -> None:
    for word, super_category, description in words:
        word_label, _ = WordLabel.objects.get_or_create(
            name=word, defaults={"super_category": super_category}
        )
        label, _ = Label.objects.get_or_create(
            mid=f"/m/{word}", defaults={"name": word.title(), "description": description}
        )
        label.word_label = word_label
        label.save()
        clip.labels.add(label)


@pytest.fixture
def submitted(project: Project, ann: Any, settings: Any, tmp_path: Path) -> list[Assignment]:
    """Ann's three submitted one-clip HITs, oldest first; the last one is flagged."""
    settings.MEDIA_ROOT = tmp_path
    clips = make_clips(3)
    for clip in clips:
        clip.audio.save(f"clip{clip.pk}.wav", ContentFile(_wav()))
    _hints(clips[0], ("speech", "human", "The sound of people talking."))
    _hints(
        clips[1],
        ("dog", "animal", "Sounds of a domestic dog, such as barking."),
        ("car", "mechanical", "Sounds of a passing motor car."),
    )
    _hints(clips[2], ("rain", "natural", "Water falling from clouds."))
    subset = make_subset(project, clips)
    publish(subset, captions_per_clip=1, clips_per_hit=1, name="Street sounds")
    start = timezone.now() - timedelta(hours=3)
    done = []
    for n, text in enumerate(CAPTIONS):
        at = start + timedelta(minutes=10 * n)
        assignment = hit_claim(worker=ann, now=at)
        assert assignment is not None
        done.append(
            assignment_submit(
                assignment=listened(assignment, now=at),
                worker=ann,
                captions=captions_for(assignment, text),
                now=at,
            )
        )
    # the HIT page's log: all heard to the end but the first; the video hint of the
    # dog clip was opened four minutes before its submission
    for assignment in done[1:]:
        ClipListen.objects.create(
            assignment=assignment, clip=assignment.hit.clips.get(), heard_at=assignment.accepted_at
        )
    submitted_at = done[1].submitted_at
    assert submitted_at is not None
    VideoHintView.objects.create(
        assignment=done[1],
        clip=done[1].hit.clips.get(),
        opened_at=submitted_at - timedelta(minutes=4),
    )
    flag_create(
        caption=done[2].captions.get(),
        reason="The captioning model disagrees (CIDEr 0.08 against its own caption)",
        evidence={"cider": 0.08},
    )
    return done


def _card(page: Page, assignment: Assignment) -> Any:
    return page.locator(f'[data-assignment="{assignment.pk}"]')


def test_it_rejects_fixes_approves_and_blocks(
    page: Page,
    browser: Browser,
    live_server: Any,
    submitted: list[Assignment],
    project: Project,
    ann: Any,
    rey: Any,
    output_path: str,
) -> None:
    site = live_server.url
    speech, tense, flagged = submitted
    page.set_default_timeout(TIMEOUT_MS)
    page.set_viewport_size({"width": 1280, "height": 1000})
    log_in(page, site, "rey")
    page.goto(f"{site}/projects/{project.slug}/review/")

    cards = page.get_by_test_id("review-card")
    expect(cards).to_have_count(3)
    # flagged work first, then the oldest
    expect(cards.nth(0)).to_have_attribute("data-assignment", str(flagged.pk))
    expect(cards.nth(1)).to_have_attribute("data-assignment", str(speech.pk))
    expect(_card(page, flagged).get_by_test_id("flag")).to_contain_text("model disagrees")
    expect(_card(page, tense).locator(".hints")).to_contain_text("dog")
    expect(_card(page, tense).get_by_text("dog", exact=True)).to_have_attribute(
        "title", "Sounds of a domestic dog, such as barking."
    )
    expect(_card(page, tense).get_by_test_id("video-hint")).to_have_text(
        "video hint opened 4\xa0minutes before submitting"
    )
    expect(_card(page, speech).get_by_test_id("video-hint")).to_have_text("video hint not used")
    expect(_card(page, speech).get_by_test_id("hit-log")).to_contain_text("not heard to the end")
    page.screenshot(path=f"{output_path}/review-queue.png", full_page=True)

    # j moves to the speech card; r goes to its reason; Enter rejects
    page.locator("body").press("j")
    expect(_card(page, speech)).to_have_class("review-card current")
    page.keyboard.press("r")
    reason = _card(page, speech).locator("select[data-reason]")
    expect(reason).to_be_focused()
    reason.select_option("speech")
    reason.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(
        f"Rejected assignment #{speech.pk}; its slot is open for another worker."
    )
    expect(page.get_by_test_id("review-card")).to_have_count(2)
    speech.refresh_from_db()
    assert speech.state == Assignment.State.REJECTED
    assert Review.objects.get(assignment=speech).reason == "speech"
    assert Hit.objects.get(pk=speech.hit_id).taken == 0  # the slot re-opened

    # fix the tense, then approve
    card = _card(page, tense)
    card.get_by_text("Fix the text").click()
    card.get_by_label("Fixed caption for clip").fill(FIXED)
    card.get_by_role("button", name="Fix & approve").click()
    expect(page.get_by_role("status")).to_contain_text(f"Fixed and approved assignment #{tense.pk}")
    expect(page.get_by_test_id("review-card")).to_have_count(1)
    caption = Caption.objects.get(assignment=tense)
    assert (caption.text, caption.fixed_text) == (CAPTIONS[1], FIXED)
    tense.refresh_from_db()
    assert tense.state == Assignment.State.APPROVED
    page.screenshot(path=f"{output_path}/review-queue-after.png", full_page=True)

    # block the worker from their page
    _card(page, flagged).get_by_role("link", name="ann").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("ann")
    expect(page.get_by_test_id("approved")).to_have_text("1")
    expect(page.get_by_test_id("rejected")).to_have_text("1")
    page.get_by_label("Block reason").fill("Transcribes speech again and again.")
    page.get_by_role("button", name="Block from this project").click()
    expect(page.get_by_test_id("blocked")).to_be_visible()
    assert Block.objects.active().filter(worker=ann, project=project).exists()
    page.screenshot(path=f"{output_path}/worker-page.png", full_page=True)

    # the worker tries to work and sees why not
    worker = browser.new_context(viewport={"width": 1100, "height": 700}).new_page()
    worker.set_default_timeout(TIMEOUT_MS)
    log_in(worker, site, "ann")
    worker.goto(f"{site}/work/")
    expect(worker.get_by_test_id("standing")).to_contain_text("You are blocked")
    worker.get_by_role("button", name="Start working").click()
    expect(worker).to_have_url(f"{site}/work/blocked/")
    expect(worker.get_by_test_id("block-reason")).to_have_text(
        "Transcribes speech again and again."
    )
    worker.screenshot(path=f"{output_path}/block-page.png", full_page=True)
    assert not Assignment.objects.filter(worker=ann, state="accepted").exists()


def test_a_meaning_flag_shows_its_reason_and_probability_in_plain_words(
    page: Page,
    live_server: Any,
    submitted: list[Assignment],
    project: Project,
    rey: Any,
    flag_model_file: Path,
) -> None:
    """The flag the job writes for a lazy caption among four real paraphrases reads, on the
    review page, as a sentence with the probability (no raw evidence numbers)."""
    from active import scoring
    from active.flagmodel import FlagModel, caption_check

    others = [
        "A dog barks repeatedly while cars pass by on a busy road.",
        "A canine yelps over and over as traffic drives past.",
        "Traffic goes by as a dog is barking loudly.",
        "Vehicles drive past while a dog keeps barking.",
    ]
    lazy = "A sound is heard."
    findings, _ = caption_check(
        text=lazy,
        others=others,
        cider=scoring.CiderD([[*others, lazy]]),
        thresholds=scoring.FlagThresholds(),
        model=FlagModel.load(flag_model_file),
    )
    (finding,) = findings
    speech = submitted[0]
    flag_create(
        caption=speech.captions.get(),
        reason=finding.reason,
        evidence={"kind": finding.kind, **finding.evidence},
    )
    percent = round(100 * finding.evidence["probability"])

    site = live_server.url
    page.set_default_timeout(TIMEOUT_MS)
    log_in(page, site, "rey")
    page.goto(f"{site}/projects/{project.slug}/review/")

    line = _card(page, speech).get_by_test_id("flag")
    expect(line).to_contain_text(
        "Likely generic: names no particular sound, unlike the other four captions"
    )
    expect(line).to_contain_text(f"; {percent} %")
    expect(line.get_by_test_id("flag-evidence")).to_have_count(0)
