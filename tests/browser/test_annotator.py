"""The annotator's HIT page through a real browser against the live server: pass the
batch's qualification test (a reviewer grades it in a second browser), claim a HIT,
play the clip to the end (a 1.2 s synthetic tone, so "heard in full" comes quickly), read a
hint's definition, open the video hint (logged on the server), see a rule broken, fix it,
submit and land on the next HIT. Also: the JS rule engine gives the same verdicts and
messages as annotation/rules.py on every sample caption.

Screenshots of the HIT page go to $EARMARK_VAR_DIR/artifacts/.
"""

from __future__ import annotations

import io
import math
import shutil
import struct
import subprocess
import wave
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from playwright.sync_api import Browser, Page, expect

from annotation import rules
from annotation.models import Assignment, Batch, Caption, ClipListen, VideoHintView
from core.models import Project
from crowd.models import QualificationAttempt
from crowd.services import batch_requirements_set, qualification_create
from curation.models import Clip, Label, SuperCategory, WordLabel
from tests.annotation.caption_samples import LIMITS, SAMPLES
from tests.annotation.factories import make_clips, make_subset, publish
from tests.browser.conftest import CHROMIUM, CHROMIUM_MISSING
from tests.browser.test_roles import TIMEOUT_MS, log_in

if not CHROMIUM.exists():
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

pytestmark = pytest.mark.browser

STATIC = Path(__file__).resolve().parents[2] / "static"
SECONDS = 1.2
RATE = 16_000
BAD = "There is a dog barking in the distance"
GOOD = "A dog barks loudly while a car passes by"


def _tone(seconds: float = SECONDS, rate: int = RATE) -> tuple[bytes, list[float]]:
    """A 440 Hz tone that swells and fades, as a WAV, and its peaks for the waveform."""
    n = int(seconds * rate)
    samples = [
        math.sin(math.pi * i / n) ** 2 * math.sin(2 * math.pi * 440 * i / rate) for i in range(n)
    ]
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(struct.pack("<h", int(12_000 * s)) for s in samples))
    size = n // 200
    peaks = [max(abs(s) for s in samples[i : i + size]) for i in range(0, size * 200, size)]
    return buffer.getvalue(), peaks


def _video(path: Path) -> bytes:
    """A 144p silent H.264 video hint, as clip fetching makes them."""
    ffmpeg = shutil.which(django_settings.FFMPEG_BINARY) or pytest.skip("ffmpeg is missing")
    subprocess.run(
        [
            ffmpeg, "-v", "error", "-f", "lavfi", "-i", f"testsrc=size=256x144:rate=10:d={SECONDS}",
            "-pix_fmt", "yuv420p", "-c:v", "libx264", "-movflags", "+faststart", "-an", str(path),
        ],
        check=True,
    )  # fmt: skip
    return path.read_bytes()


def _hint(clip: Clip, word: str, name: str, description: str) -> None:
    word_label, _ = WordLabel.objects.get_or_create(
        name=word, defaults={"super_category": SuperCategory.ANIMAL}
    )
    label, _ = Label.objects.get_or_create(
        mid=f"/m/{name.lower()}",
        defaults={"name": name, "description": description, "word_label": word_label},
    )
    clip.labels.add(label)


@pytest.fixture
def artifacts() -> Path:
    folder = Path(django_settings.VAR_DIR) / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _street(project: Project, tmp_path: Path, clips_per_hit: int) -> Batch:
    """Two playable clips with word hints and a video hint, in HITs of `clips_per_hit`."""
    wav, peaks = _tone()
    video = _video(tmp_path / "hint.mp4")
    clips = make_clips(2)
    for clip in clips:
        clip.audio.save(f"clip{clip.pk}.wav", ContentFile(wav))
        clip.video.save(f"clip{clip.pk}.mp4", ContentFile(video))
        clip.peaks, clip.duration_seconds = peaks, SECONDS
        clip.save(update_fields=["peaks", "duration_seconds"])
        _hint(clip, "dog", "Bark", "Principally the sound of a dog, a short loud cry.")
        _hint(clip, "dog", "Growl", "A low guttural sound of a dog, a warning.")
        _hint(clip, "car", "Car passing by", "A car passes the listener, rising then fading.")
    subset = make_subset(project, clips)
    return publish(subset, captions_per_clip=1, clips_per_hit=clips_per_hit, name="Street sounds")


@pytest.fixture
def street(project: Project, settings: Any, tmp_path: Path) -> Batch:
    """Two one-clip HITs."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return _street(project, tmp_path, clips_per_hit=1)


@pytest.fixture
def street_pair(project: Project, settings: Any, tmp_path: Path) -> Batch:
    """One HIT of two clips."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return _street(project, tmp_path, clips_per_hit=2)


def test_it_takes_an_annotator_through_a_hit(
    page: Page,
    browser: Browser,
    live_server: Any,
    street: Batch,
    ann: Any,
    alice: Any,
    artifacts: Path,
) -> None:
    site = live_server.url
    page.set_default_timeout(TIMEOUT_MS)
    page.set_viewport_size({"width": 1280, "height": 1000})
    first_hit = street.hits.first()
    assert first_hit is not None
    test = qualification_create(
        project=street.project,
        created_by=alice,
        name="Street sounds test",
        clip_ids=str(first_hit.hit_clips.get().clip_id),
    )
    batch_requirements_set(
        batch=street, by=alice, qualifications=[test], min_approval_percent=0, min_approved=0
    )
    log_in(page, site, "ann")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Work").click()

    # the batch is closed to Ann until she passes its qualification, and the page says so
    standing = page.get_by_test_id("standing")
    expect(standing).to_contain_text("Some batches need a qualification first")
    page.get_by_role("button", name="Start working").click()
    expect(page.get_by_text("No HITs are available for you right now.")).to_be_visible()
    assert not Assignment.objects.filter(worker=ann).exists()
    standing.get_by_role("link", name="Street sounds test").click()
    page.get_by_label("Caption").fill(BAD)
    page.get_by_role("button", name="Submit answers").click()
    expect(page.get_by_role("alert")).to_contain_text("The caption for clip 1")
    page.get_by_label("Caption").fill(GOOD)
    page.get_by_role("button", name="Submit answers").click()
    expect(page.get_by_text("Thank you! A reviewer will grade your answers.")).to_be_visible()
    expect(page.get_by_test_id("my-qualifications")).to_contain_text("Waiting for review")
    attempt = QualificationAttempt.objects.get(worker=ann)

    # a reviewer passes her answers
    reviewer = browser.new_context().new_page()
    reviewer.set_default_timeout(TIMEOUT_MS)
    log_in(reviewer, site, "rey")
    reviewer.goto(f"{site}{attempt.get_absolute_url()}")
    expect(reviewer.get_by_test_id("answer")).to_have_text(GOOD)
    reviewer.get_by_label("Pass").check()
    reviewer.get_by_role("button", name="Grade").click()
    expect(reviewer.get_by_role("status")).to_contain_text("ann: passed.")
    reviewer.context.close()
    attempt.refresh_from_db()
    assert attempt.state == QualificationAttempt.State.APPROVED

    # now the batch's HITs are hers to take
    page.get_by_role("link", name="← Work").click()
    expect(page.get_by_test_id("standing")).not_to_contain_text("need a qualification")
    page.get_by_role("button", name="Start working").click()

    first = Assignment.objects.get(worker=ann)
    expect(page).to_have_url(f"{site}{first.get_absolute_url()}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Street sounds")
    expect(page.locator("#instructions")).to_have_attribute("open", "")
    box = page.get_by_label("Your caption for clip 1")
    expect(box).to_have_attribute("readonly", "")
    expect(page.get_by_text("Listen to the whole clip once to unlock the box.")).to_be_visible()
    page.screenshot(path=str(artifacts / "hit_page_new.png"), full_page=True)

    # a hint's definition, on keyboard focus and on hover
    dog = page.get_by_role("button", name="dog", exact=True)
    dog.focus()
    tooltip = page.get_by_role("tooltip").filter(has_text="Principally the sound of a dog")
    expect(tooltip).to_be_visible()
    expect(tooltip).to_contain_text("A low guttural sound of a dog")
    expect(dog).to_have_accessible_description(
        "Bark Principally the sound of a dog, a short loud cry. "
        "Growl A low guttural sound of a dog, a warning."
    )
    page.get_by_role("button", name="car", exact=True).hover()
    expect(page.get_by_role("tooltip").filter(has_text="rising then fading")).to_be_visible()

    # the video hint, muted, and logged on the server
    page.get_by_role("button", name="Unsure? Show video").click()
    video = page.locator("video[data-video]")
    expect(video).to_be_visible()
    expect(
        page.get_by_role("button", name="Video hint opened (reviewers see this)")
    ).to_be_visible()
    assert video.evaluate("v => v.muted") is True
    hint = VideoHintView.objects.get()
    assert (hint.assignment, hint.clip) == (first, first.hit.hit_clips.get().clip)

    # play with the keyboard until the clip has been heard in full
    page.locator("canvas.wave").focus()
    page.keyboard.press("Space")
    expect(page.locator("[data-heard-state]")).to_have_text("Heard in full", timeout=15_000)
    expect(box).not_to_have_attribute("readonly", "")
    expect(box).to_be_focused()
    expect(page.locator("[data-heard-state]")).to_have_attribute("data-logged", "1")
    assert ClipListen.objects.filter(assignment=first).exists()

    # a broken rule, live, with the server's message; Space and r go into the text
    page.keyboard.type(BAD)
    expect(box).to_have_value(BAD)
    problem = page.locator("[data-checks] li.error")
    expect(problem).to_have_text(
        "The caption for clip 1 starts with “There is”; start with the sound itself, "
        "e.g. “a dog barks …”."
    )
    page.locator("section.clip").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "hit_page_rule_broken.png"))

    box.fill(GOOD)
    expect(problem).to_have_count(0)
    expect(page.locator("[data-ready]")).to_have_text("1 of 1 caption ready")
    page.screenshot(path=str(artifacts / "hit_page_ready.png"))

    # submit from the keyboard, straight on to the next HIT
    page.keyboard.press("Control+Enter")
    second = Assignment.objects.filter(worker=ann).exclude(pk=first.pk)
    expect(page.get_by_role("status")).to_contain_text("Submitted. Thank you!")
    assert second.count() == 1
    expect(page).to_have_url(f"{site}{second.get().get_absolute_url()}")
    expect(page.locator("#instructions")).not_to_have_attribute("open", "")
    expect(page.get_by_label("Your caption for clip 1")).to_have_attribute("readonly", "")
    first.refresh_from_db()
    assert first.state == Assignment.State.SUBMITTED
    assert Caption.objects.get(assignment=first).text == GOOD
    page.screenshot(path=str(artifacts / "hit_page_next.png"))


def test_it_blocks_submitting_with_the_same_message_as_the_server(
    page: Page, live_server: Any, street: Batch, ann: Any
) -> None:
    site = live_server.url
    page.set_default_timeout(TIMEOUT_MS)
    log_in(page, site, "ann")
    page.goto(f"{site}/work/")
    page.get_by_role("button", name="Start working").click()
    assignment = Assignment.objects.get(worker=ann)
    clip = assignment.hit.hit_clips.get().clip
    ClipListen.objects.create(assignment=assignment, clip=clip)
    page.reload()
    box = page.get_by_label("Your caption for clip 1")
    expect(box).not_to_have_attribute("readonly", "")
    box.fill("dog barks")
    page.get_by_role("button", name="Submit and next").click()
    expect(page.locator("[data-checks] li.error")).to_have_text(
        "The caption for clip 1 has 2 words; write at least 3."
    )
    assert not Caption.objects.exists()
    assert page.url == f"{site}{assignment.get_absolute_url()}"


def test_it_captions_every_clip_of_a_hit_then_says_no_work_is_left(
    page: Page, live_server: Any, street_pair: Batch, ann: Any, artifacts: Path
) -> None:
    site = live_server.url
    page.set_default_timeout(TIMEOUT_MS)
    page.set_viewport_size({"width": 1280, "height": 1000})
    log_in(page, site, "ann")
    page.goto(f"{site}/work/")
    page.get_by_role("button", name="Start working").click()
    page.locator("#instructions > summary").click()  # fold them: one click away
    clips = page.locator("section.clip")
    expect(clips).to_have_count(2)

    for number, text in ((1, GOOD), (2, "Rain falls steadily on a roof as thunder rumbles")):
        page.keyboard.press(str(number))  # go to clip N, then play it from the keyboard
        expect(clips.nth(number - 1)).to_have_class("clip current")
        page.keyboard.press("Space")
        box = page.get_by_label(f"Your caption for clip {number}")
        expect(box).to_be_focused(timeout=15_000)  # unlocked once heard, ready to type
        page.keyboard.type(text)
        page.keyboard.press("Escape")
    expect(page.locator("[data-ready]")).to_have_text("2 of 2 captions ready")
    page.screenshot(path=str(artifacts / "hit_page_two_clips.png"), full_page=True)

    page.get_by_role("button", name="Submit and next").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("That's all for now. Thank you!")
    expect(page.get_by_test_id("pending")).to_have_text("$0.10 not earned yet")
    page.screenshot(path=str(artifacts / "work_done.png"))
    assert Caption.objects.filter(assignment__worker=ann).count() == 2


# The same rules in both languages ------------------------------------------------------


@pytest.fixture
def rules_page(page: Page) -> Page:
    page.set_content("<!doctype html><title>rules</title>")
    page.add_script_tag(path=str(STATIC / "caption_rules.js"))
    return page


def test_it_compiles_every_rule_pattern_in_the_browser(rules_page: Page) -> None:
    table = rules.table(LIMITS)
    failures = rules_page.evaluate(
        """table => table.rules.filter(r => r.pattern).flatMap(r => {
            try { new RegExp(r.pattern, r.ignore_case ? "i" : ""); return []; }
            catch (e) { return [r.code + ": " + e.message]; }
        })""",
        table,
    )
    assert failures == []


def test_it_gives_the_same_verdicts_and_messages_as_the_server(rules_page: Page) -> None:
    table = rules.table(LIMITS)
    texts = [text for text, _ in SAMPLES]
    in_js = rules_page.evaluate(
        """([table, texts]) => texts.map(t => {
            const text = EarmarkCaptionRules.trim(t, table);
            return EarmarkCaptionRules.check(text, table).map(p => [p.code, p.level, p.message]);
        })""",
        [table, texts],
    )
    in_python = [
        [[p.code, p.level, p.message] for p in rules.check(rules.trim(text), LIMITS)]
        for text in texts
    ]
    assert in_js == in_python


def test_it_finds_lone_surrogates_but_not_emoji_in_the_browser(rules_page: Page) -> None:
    codes = rules_page.evaluate(
        """table => ["a dog \\ud800 barks loudly", "a dog \\udc00 barks loudly",
                     "a dog 🐕 barks loudly"].map(
            t => EarmarkCaptionRules.check(t, table).map(p => p.code))""",
        rules.table(LIMITS),
    )
    assert codes == [["control"], ["control"], []]
