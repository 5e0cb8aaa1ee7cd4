"""The HIT page and its endpoints: the heard-in-full lock, word hints, the logged video
hint, problem reports, the worker's own record, multi-clip HITs, "submit and next" and
hostile captions. Who may reach each URL is in test_views.py (every URL, every persona);
the browser half is tests/browser/test_annotator.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from annotation import rules
from annotation.models import (
    Assignment,
    Batch,
    Caption,
    ClipAudioServed,
    ClipListen,
    ClipReport,
    Hit,
    VideoHintView,
)
from annotation.services import assignment_submit, caption_limits, hit_claim
from core.models import Project
from crowd.models import LedgerEntry, RejectReason
from crowd.services import review_approve, review_reject
from curation.models import Clip, Label, SuperCategory, WordLabel
from tests.annotation.factories import CAPTION, MakeBatch, captions_for, listened
from tests.conftest import login, streamed, wav_bytes


def _claim(worker: Any) -> Assignment:
    assignment = hit_claim(worker=worker)
    assert assignment is not None
    return assignment


def _clip(assignment: Assignment, position: int = 0) -> Clip:
    return assignment.hit.hit_clips.order_by("position")[position].clip


def _page(client: Client, assignment: Assignment) -> str:
    response = client.get(reverse("assignment_detail", args=[assignment.pk]))
    assert response.status_code == 200
    return response.content.decode()


def _textarea(page: str, clip: Clip) -> str:
    match = re.search(rf'<textarea id="caption-{clip.pk}"[^>]*>', page)
    assert match, f"no caption box for clip {clip.pk}"
    return match.group(0)


def _json_script(page: str, element_id: str) -> Any:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page)
    assert match, f"no json_script {element_id}"
    return json.loads(match.group(1))


def _url(name: str, assignment: Assignment, clip: Clip) -> str:
    return reverse(name, args=[assignment.pk, clip.pk])


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


@pytest.fixture
def assignment(batch: Batch, ann: Any) -> Assignment:
    return _claim(ann)


@pytest.fixture
def with_video(assignment: Assignment, media: Path) -> Clip:
    clip = _clip(assignment)
    clip.video.save("hint.mp4", ContentFile(b"fake-h264-video"))
    return clip


# The page ------------------------------------------------------------------------------


def test_it_embeds_the_rule_table_the_server_checks_with(make_batch: MakeBatch, ann: Any) -> None:
    batch = make_batch(min_words=4, max_words=9)
    page = _page(login(ann), _claim(ann))
    assert _json_script(page, "caption-rules") == json.loads(
        json.dumps(rules.table(caption_limits(batch)))
    )
    assert "caption_rules.js" in page
    assert "hit.js" in page


def test_it_ships_the_formula_rule_to_the_browser(assignment: Assignment, ann: Any) -> None:
    table = _json_script(_page(login(ann), assignment), "caption-rules")

    formula = next(rule for rule in table["rules"] if rule["code"] == "formula")
    assert formula["level"] == "error"
    assert formula["pattern"] == rules.RULES_BY_CODE["formula"].pattern
    for text in ["=1+1 a dog", "+a dog", "-a dog", "@a dog", "\ta dog", "\ra dog"]:
        assert re.search(formula["pattern"], text), text


def test_it_opens_the_instructions_for_a_new_worker(assignment: Assignment, ann: Any) -> None:
    page = _page(login(ann), assignment)
    assert '<details class="instructions" id="instructions" open>' in page
    assert "Write one sentence of 3 to 40 words." in page
    for text in rules.GOOD_EXAMPLES:
        assert text in page


def test_it_folds_the_instructions_once_the_worker_has_submitted(
    make_batch: MakeBatch, ann: Any
) -> None:
    make_batch(clips=2)
    assignment_submit(
        assignment=listened(first := _claim(ann)), worker=ann, captions=captions_for(first)
    )
    page = _page(login(ann), _claim(ann))
    assert '<details class="instructions" id="instructions">' in page


def test_it_lists_the_keyboard_shortcuts(assignment: Assignment, ann: Any) -> None:
    page = _page(login(ann), assignment)
    for key in (
        "<kbd>Space</kbd>",
        "<kbd>R</kbd>",
        "<kbd>Alt</kbd>+<kbd>P</kbd>",
        "<kbd>Esc</kbd>",
    ):
        assert key in page


def test_it_gives_the_player_the_clips_peaks(assignment: Assignment, ann: Any) -> None:
    clip = _clip(assignment)
    Clip.objects.filter(pk=clip.pk).update(peaks=[0.1, 0.9, 0.4], duration_seconds=2.5)
    data = _json_script(_page(login(ann), assignment), "hit-data")
    assert data["clips"] == [
        {
            "id": clip.pk,
            "number": 1,
            "peaks": [0.1, 0.9, 0.4],
            "duration": 2.5,
            "heard": False,
            "heard_url": _url("assignment_clip_heard", assignment, clip),
            "video_open_url": None,
            "video_url": _url("assignment_clip_video", assignment, clip),
            "video_opened": False,
        }
    ]


# Heard in full -------------------------------------------------------------------------


def test_it_locks_the_caption_box_until_the_clip_was_heard(
    assignment: Assignment, ann: Any
) -> None:
    page = _page(login(ann), assignment)
    assert " readonly" in _textarea(page, _clip(assignment))
    assert "Listen to the whole clip once to unlock the box." in page


def test_it_announces_heard_in_full_to_screen_readers(assignment: Assignment, ann: Any) -> None:
    page = login(ann).get(assignment.get_absolute_url()).content.decode()

    assert 'data-heard-state aria-live="polite">Not heard in full yet</span>' in page


def test_it_remembers_a_heard_clip_across_reloads(assignment: Assignment, ann: Any) -> None:
    client, clip = login(ann), _clip(listened(assignment))
    response = client.post(_url("assignment_clip_heard", assignment, clip))
    assert response.status_code == 200
    listen = ClipListen.objects.get()
    assert (listen.assignment, listen.clip) == (assignment, clip)
    assert response.json() == {"heard_at": listen.heard_at.isoformat()}
    assert " readonly" not in _textarea(_page(client, assignment), clip)


def test_it_keeps_the_first_time_a_clip_was_heard(assignment: Assignment, ann: Any) -> None:
    client, clip = login(ann), _clip(listened(assignment))
    first = client.post(_url("assignment_clip_heard", assignment, clip)).json()
    again = client.post(_url("assignment_clip_heard", assignment, clip)).json()
    assert first == again
    assert ClipListen.objects.count() == 1


def test_it_refuses_to_log_listening_after_submitting(assignment: Assignment, ann: Any) -> None:
    assignment_submit(
        assignment=listened(assignment), worker=ann, captions=captions_for(assignment)
    )
    response = login(ann).post(_url("assignment_clip_heard", assignment, _clip(assignment)))
    assert response.status_code == 409
    assert response.json() == {"error": "This assignment is already submitted."}
    assert not ClipListen.objects.exists()


def test_it_refuses_csrf_less_posts(assignment: Assignment, ann: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ann)
    response = client.post(_url("assignment_clip_heard", assignment, _clip(assignment)))
    assert response.status_code == 403
    assert not ClipListen.objects.exists()


# Word hints ----------------------------------------------------------------------------


def test_it_shows_word_hints_with_their_ontology_descriptions(
    assignment: Assignment, ann: Any
) -> None:
    dog = WordLabel.objects.create(name="dog", super_category=SuperCategory.ANIMAL)
    bark = Label.objects.create(
        mid="/m/05tny_", name="Bark", description="Principally the sound of a dog.", word_label=dog
    )
    howl = Label.objects.create(
        mid="/m/07r_k2n", name="Howl", description="A long wailing cry.", word_label=dog
    )
    siren = Label.objects.create(mid="/m/03kmc9", name="Siren", description="A loud alarm.")
    _clip(assignment).labels.set([bark, howl, siren])
    page = _page(login(ann), assignment)
    hints = re.findall(
        r'<button type="button" class="hint" aria-describedby="([\w-]+)">(\w+)<', page
    )
    assert [word for _, word in hints] == ["Siren", "dog"]
    tip = re.search(
        rf'<span class="hint-tip" role="tooltip" id="{hints[1][0]}">(.*?)</span>\s*</li>', page
    )
    assert tip is not None
    assert "<strong>Bark</strong> Principally the sound of a dog." in tip.group(1)
    assert "<strong>Howl</strong> A long wailing cry." in tip.group(1)


def test_it_escapes_hint_descriptions(assignment: Assignment, ann: Any) -> None:
    label = Label.objects.create(mid="/m/x", name="<b>Odd</b>", description="<script>x()</script>")
    _clip(assignment).labels.add(label)
    page = _page(login(ann), assignment)
    assert "&lt;script&gt;x()&lt;/script&gt;" in page
    assert "<script>x()" not in page
    assert "<b>Odd</b>" not in page


# The video hint ------------------------------------------------------------------------


def test_it_hides_the_video_behind_a_button(
    with_video: Clip, assignment: Assignment, ann: Any
) -> None:
    page = _page(login(ann), assignment)
    assert "Unsure? Show video" in page
    assert re.search(r"<video data-video muted playsinline controls preload=\"none\" hidden>", page)
    assert _json_script(page, "hit-data")["clips"][0]["video_open_url"] == _url(
        "assignment_video_hint", assignment, with_video
    )


def test_it_logs_the_opening_of_the_video_hint(
    with_video: Clip, assignment: Assignment, ann: Any
) -> None:
    before = timezone.now()
    response = login(ann).post(_url("assignment_video_hint", assignment, with_video))
    assert response.status_code == 200
    view = VideoHintView.objects.get()
    assert (view.assignment, view.clip) == (assignment, with_video)
    assert before <= view.opened_at <= timezone.now()
    assert response.json() == {
        "opened_at": view.opened_at.isoformat(),
        "video_url": _url("assignment_clip_video", assignment, with_video),
    }


def test_it_serves_the_video_only_after_logging_its_opening(
    with_video: Clip, assignment: Assignment, ann: Any
) -> None:
    client = login(ann)
    video_url = _url("assignment_clip_video", assignment, with_video)
    assert client.get(video_url).status_code == 403
    client.post(_url("assignment_video_hint", assignment, with_video))
    response = client.get(video_url)
    assert response.status_code == 200
    assert streamed(response) == b"fake-h264-video"


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "is missing from storage"), (b"", "is empty (0 bytes)")],
    ids=["deleted", "empty"],
)
def test_it_logs_no_opening_of_a_video_hint_whose_file_broke(
    with_video: Clip, assignment: Assignment, ann: Any, content: bytes | None, problem: str
) -> None:
    stored = Path(with_video.video.path)
    if content is None:
        stored.unlink()
    else:
        stored.write_bytes(content)
    response = login(ann).post(_url("assignment_video_hint", assignment, with_video))
    assert response.status_code == 409
    assert response.json() == {
        "error": f"The video hint cannot be shown: its video hint {with_video.video.name} "
        f"{problem}."
    }
    assert not VideoHintView.objects.exists()


def test_it_says_when_a_clip_has_no_video_hint(assignment: Assignment, ann: Any) -> None:
    response = login(ann).post(_url("assignment_video_hint", assignment, _clip(assignment)))
    assert response.status_code == 409
    assert response.json() == {"error": "This clip has no video hint."}
    assert not VideoHintView.objects.exists()


def test_it_shows_the_researcher_which_captions_used_the_video(
    with_video: Clip, assignment: Assignment, ann: Any, alice: Any
) -> None:
    login(ann).post(_url("assignment_video_hint", assignment, with_video))
    assignment_submit(
        assignment=listened(assignment), worker=ann, captions=captions_for(assignment)
    )
    batch = assignment.hit.batch
    response = login(alice).get(reverse("batch_detail", args=[batch.project.slug, batch.pk]))
    assert [c.video_hint for c in response.context["captions"]] == [True]


# Broken audio --------------------------------------------------------------------------

# a file broken after the clip was ready: deleted, emptied, overwritten, cut short
BROKEN_AUDIO: list[tuple[bytes | None, str]] = [
    (None, "is missing from storage"),
    (b"", "is empty (0 bytes)"),
    (bytes(range(256)) * 64, "is not readable audio (Format not recognised.)"),
    (wav_bytes(seconds=4.0)[: 44 + 2 * 8000], "holds 1.00 s of audio, not the 10.00 s stored"),
]


def _break_audio(clip: Clip, content: bytes | None) -> None:
    clip.audio.save("clip.wav", ContentFile(wav_bytes(seconds=10.0)))
    Clip.objects.filter(pk=clip.pk).update(duration_seconds=10.0)
    clip.refresh_from_db()
    stored = Path(clip.audio.path)
    if content is None:
        stored.unlink()
    else:
        stored.write_bytes(content)


@pytest.mark.parametrize(
    ("content", "problem"), BROKEN_AUDIO, ids=["deleted", "empty", "noise", "cut"]
)
def test_it_refuses_broken_audio_saying_why_and_fails_the_clip(
    assignment: Assignment, ann: Any, media: Path, content: bytes | None, problem: str
) -> None:
    clip = _clip(assignment)
    _break_audio(clip, content)

    response = login(ann).get(
        _url("assignment_clip_audio", assignment, clip), HTTP_RANGE="bytes=0-"
    )

    assert response.status_code == 404  # not 200 or 206 with nothing, or noise as audio
    reason = f"its audio file {clip.audio.name} {problem}"
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == (
        f"The audio of clip {clip.pk} cannot be played: {reason}. The clip is marked failed "
        "and is no longer offered for captioning."
    )
    clip.refresh_from_db()
    assert clip.status == Clip.Status.FAILED
    assert clip.error.startswith(f"Broken after it was stored: {reason};")
    assert clip.media_broken_at is not None
    assert not ClipAudioServed.objects.exists()  # nothing was played


def test_it_offers_no_hit_whose_clip_audio_broke(
    batch: Batch, ann: Any, abe: Any, media: Path
) -> None:
    held = _claim(ann)
    _break_audio(_clip(held), b"")
    login(ann).get(_url("assignment_clip_audio", held, _clip(held)))

    # the HIT has a free slot and comes first, yet Abe gets another one; so does Ann
    assert _claim(abe).hit_id != held.hit_id
    login(ann).post(reverse("assignment_return", args=[held.pk]))
    assert _claim(ann).hit_id != held.hit_id


def test_it_offers_the_hit_again_once_the_clip_is_restored(
    batch: Batch, ann: Any, abe: Any, media: Path
) -> None:
    held = _claim(ann)
    clip = _clip(held)
    _break_audio(clip, None)
    login(ann).get(_url("assignment_clip_audio", held, clip))
    Clip.objects.filter(pk=clip.pk).update(status=Clip.Status.READY, media_broken_at=None)

    assert _claim(abe).hit_id == held.hit_id


# Problem reports -----------------------------------------------------------------------


def _report(client: Client, assignment: Assignment, clip: Clip, **data: str) -> Any:
    payload = {"clip": str(clip.pk), "problem": "audio_broken", **data}
    return client.post(reverse("assignment_report", args=[assignment.pk]), payload)


def test_it_records_a_problem_and_frees_the_slot(assignment: Assignment, ann: Any) -> None:
    clip = _clip(assignment)
    _report(login(ann), assignment, clip, note="only static")
    report = ClipReport.objects.get()
    assert (report.clip, report.worker, report.problem, report.note) == (
        clip,
        ann,
        ClipReport.Problem.AUDIO_BROKEN,
        "only static",
    )
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.RETURNED
    assignment.hit.refresh_from_db()
    assert assignment.hit.taken == 0


def test_it_moves_on_to_the_next_hit_after_a_report(assignment: Assignment, ann: Any) -> None:
    response = _report(login(ann), assignment, _clip(assignment))
    following = Assignment.objects.get(worker=ann, state=Assignment.State.ACCEPTED)
    assert following.hit != assignment.hit
    assert response["Location"] == following.get_absolute_url()


def test_it_never_offers_a_reported_clip_to_that_worker_again(
    make_batch: MakeBatch, ann: Any, abe: Any
) -> None:
    make_batch(clips=1, captions_per_clip=2)
    assignment = _claim(ann)
    response = _report(login(ann), assignment, _clip(assignment))
    assert response["Location"] == reverse("work_done")
    assert hit_claim(worker=ann) is None
    assert _claim(abe).hit == assignment.hit  # the slot is free for others


def test_it_shows_reports_to_researchers(assignment: Assignment, ann: Any, alice: Any) -> None:
    _report(login(ann), assignment, _clip(assignment), problem="video_unavailable", note="<i>x</i>")
    batch = assignment.hit.batch
    page = login(alice).get(reverse("batch_detail", args=[batch.project.slug, batch.pk]))
    content = page.content.decode()
    assert "The video hint is unavailable" in content
    assert "&lt;i&gt;x&lt;/i&gt;" in content
    assert "<i>x</i>" not in content


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"problem": "boring"}, "Select a valid choice"),
        ({"note": "x" * 501}, "at most 500 characters"),
        ({"note": "bad \u202e note"}, "text-direction control character (U+202E)"),
    ],
)
def test_it_refuses_a_bad_report_with_a_message(
    assignment: Assignment, ann: Any, data: dict[str, str], message: str
) -> None:
    client = login(ann)
    response = _report(client, assignment, _clip(assignment), **data)
    assert response["Location"] == assignment.get_absolute_url()
    assert "Report not sent: " in (page := client.get(response["Location"]).content.decode())
    assert message in page
    assert not ClipReport.objects.exists()
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.ACCEPTED


def test_it_reports_only_clips_of_the_hit(batch: Batch, assignment: Assignment, ann: Any) -> None:
    other_hit = Hit.objects.exclude(pk=assignment.hit_id).first()
    assert other_hit is not None
    other = other_hit.hit_clips.get().clip
    assert _report(login(ann), assignment, other).status_code == 404
    assert not ClipReport.objects.exists()


# The worker's own record ---------------------------------------------------------------


def _reviewed(worker: Any, approve: bool) -> Assignment:
    assignment = _claim(worker)
    assignment_submit(
        assignment=listened(assignment), worker=worker, captions=captions_for(assignment)
    )
    reviewer = assignment.hit.batch.project.created_by
    assert reviewer is not None
    if approve:  # books the reward in the ledger, which is what a worker has earned
        review_approve(assignment=assignment, reviewer=reviewer)
    else:
        review_reject(assignment=assignment, reviewer=reviewer, reason=RejectReason.VISUAL_ONLY)
    return assignment


def test_it_shows_the_worker_their_approval_rate_and_earnings(
    make_batch: MakeBatch, ann: Any
) -> None:
    make_batch(clips=6, captions_per_clip=1, reward_cents=125)
    for approve in (True, True, True, False):
        _reviewed(ann, approve)
    pending = _claim(ann)
    assignment_submit(assignment=listened(pending), worker=ann, captions=captions_for(pending))
    response = login(ann).get(_claim(ann).get_absolute_url())
    stats = response.content.decode().split('data-testid="worker-stats"')[1].split("</dl>")[0]
    assert "75%" in stats
    assert "$3.75" in stats
    assert "$1.25 <small>not earned yet</small>" in stats
    assert "5 HITs" in stats  # done in this batch


def _bonus(worker: Any, cents: int) -> None:
    LedgerEntry.objects.create(
        kind=LedgerEntry.Kind.BONUS,
        project=Project.objects.get(slug="sounds"),
        worker=worker,
        amount_cents=cents,
        reason="careful work",
        idempotency_key=f"bonus-{worker.pk}-{cents}",
    )


def test_the_work_page_links_submitted_hits_which_open_read_only(
    make_batch: MakeBatch, ann: Any
) -> None:
    make_batch(clips=2, captions_per_clip=1)
    submitted = _claim(ann)
    assignment_submit(assignment=listened(submitted), worker=ann, captions=captions_for(submitted))
    client = login(ann)

    work = client.get(reverse("work")).content.decode()
    page = client.get(submitted.get_absolute_url()).content.decode()

    assert f'<a href="{submitted.get_absolute_url()}">' in work
    assert "Submit and next" not in page
    assert page.count("readonly>") == 1  # the one caption box


def test_it_counts_the_workers_bonuses_in_their_earnings(
    make_batch: MakeBatch, ann: Any, abe: Any
) -> None:
    make_batch(clips=3, captions_per_clip=2, reward_cents=125)
    _reviewed(ann, approve=True)
    _bonus(ann, 50)
    _bonus(abe, 777)
    response = login(ann).get(_claim(ann).get_absolute_url())
    stats = response.content.decode().split('data-testid="worker-stats"')[1].split("</dl>")[0]
    assert "$1.75</a> <small>incl. $0.50 bonus</small>" in stats


def test_it_shows_no_other_workers_record(make_batch: MakeBatch, ann: Any, abe: Any) -> None:
    make_batch(clips=4, captions_per_clip=2, reward_cents=999)
    _reviewed(abe, approve=True)
    _reviewed(abe, approve=False)
    response = login(ann).get(_claim(ann).get_absolute_url())
    summary = response.context["summary"]
    assert (summary.approved, summary.rejected, summary.earned_cents) == (0, 0, 0)
    content = response.content.decode()
    assert "$9.99" not in content
    assert "50%" not in content
    assert not re.search(r"\babe\b", content)


# Multi-clip HITs -----------------------------------------------------------------------


def test_it_gives_each_clip_of_a_hit_its_own_player_and_box(
    make_batch: MakeBatch, ann: Any
) -> None:
    make_batch(clips=3, clips_per_hit=3)
    assignment = _claim(ann)
    page = _page(login(ann), assignment)
    clips = [_clip(assignment, i) for i in range(3)]
    assert [c["id"] for c in _json_script(page, "hit-data")["clips"]] == [c.pk for c in clips]
    for number, clip in enumerate(clips, start=1):
        assert f'<h2 id="clip-{number}-title">Clip {number} <small>of 3</small></h2>' in page
        assert _url("assignment_clip_audio", assignment, clip) in page
        _textarea(page, clip)


def test_it_stores_one_caption_per_clip_of_a_hit(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=2, clips_per_hit=2)
    assignment = listened(_claim(ann))
    first, second = _clip(assignment, 0), _clip(assignment, 1)
    data = {
        f"caption-{first.pk}": "a dog barks loudly nearby",
        f"caption-{second.pk}": "rain falls steadily on a roof",
    }
    response = login(ann).post(reverse("assignment_submit", args=[assignment.pk]), data)
    assert response["Location"] == reverse("work_done")
    assert dict(Caption.objects.values_list("clip_id", "text")) == {
        first.pk: "a dog barks loudly nearby",
        second.pk: "rain falls steadily on a roof",
    }


def test_it_shows_each_clips_problems_next_to_it(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=2, clips_per_hit=2)
    assignment = listened(_claim(ann))
    first, second = _clip(assignment, 0), _clip(assignment, 1)
    data = {f"caption-{first.pk}": "There is a dog barking", f"caption-{second.pk}": CAPTION}
    response = login(ann).post(reverse("assignment_submit", args=[assignment.pk]), data)
    page = response.content.decode()
    section = page.split(f'data-clip="{first.pk}"')[1].split("</section>")[0]
    assert "The caption for clip 1 starts with “There is”" in section
    assert (
        '<li class="error">' not in page.split(f'data-clip="{second.pk}"')[1].split("</section>")[0]
    )
    assert not Caption.objects.exists()


# Submit and next -----------------------------------------------------------------------


def test_it_goes_straight_to_the_next_hit(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=2)
    first = listened(_claim(ann))
    data = {f"caption-{k}": v for k, v in captions_for(first).items()}
    response = login(ann).post(reverse("assignment_submit", args=[first.pk]), data)
    following = Assignment.objects.get(worker=ann, state=Assignment.State.ACCEPTED)
    assert response["Location"] == following.get_absolute_url()


def test_it_says_kindly_when_no_work_is_left(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=1, reward_cents=40)
    first = listened(_claim(ann))
    data = {f"caption-{k}": v for k, v in captions_for(first).items()}
    response = login(ann).post(reverse("assignment_submit", args=[first.pk]), data, follow=True)
    assert response.redirect_chain == [(reverse("work_done"), 302)]
    content = response.content.decode()
    assert "That's all for now. Thank you!" in content
    assert "Check for new HITs" in content
    assert "$0.40 <small>not earned yet</small>" in content


# Hostile captions ----------------------------------------------------------------------

HOSTILE = [
    ("<img src=x onerror=alert(1)> a dog barks loudly", "contains “<”; captions are plain text"),
    ("a dog barks loudly " * 6000, "is 113,999 characters long; the limit is 500"),
    ("a dog \x00barks loudly", "contains a control character (U+0000)"),
    ("a dog \x1b[31mbarks loudly", "contains a control character (U+001B)"),
    ("a dog \u202eskrab loudly", "contains a text-direction control character (U+202E)"),
    ("a dog \u2066barks\u2069 loudly", "contains a text-direction control character (U+2066)"),
    ("a dog barks\r\nloudly nearby", "contains a line break; write the caption on one line"),
]


@pytest.mark.parametrize(("text", "message"), HOSTILE, ids=lambda v: repr(v)[:20])
def test_it_refuses_hostile_captions_with_a_clear_message(
    assignment: Assignment, ann: Any, text: str, message: str
) -> None:
    data = {f"caption-{_clip(assignment).pk}": text}
    response = login(ann).post(reverse("assignment_submit", args=[assignment.pk]), data)
    assert response.status_code == 200
    assert escape(f"The caption for clip 1 {message}") in response.content.decode()
    assert not Caption.objects.exists()
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.ACCEPTED


def test_it_shows_a_refused_script_caption_escaped_in_the_box(
    assignment: Assignment, ann: Any
) -> None:
    text = '</textarea><script>alert("x")</script>'
    response = login(ann).post(
        reverse("assignment_submit", args=[assignment.pk]),
        {f"caption-{_clip(assignment).pk}": text},
    )
    content = response.content.decode()
    assert (
        "&lt;/textarea&gt;&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</textarea>" in content
    )
    assert "<script>alert" not in content


def test_it_keeps_the_text_of_a_caption_with_a_warning(assignment: Assignment, ann: Any) -> None:
    # warnings (past tense, no detail) never block
    text = "a dog barked at a car"
    assignment_submit(
        assignment=listened(assignment), worker=ann, captions={_clip(assignment).pk: f"  {text}\n"}
    )
    assert Caption.objects.get().text == text
