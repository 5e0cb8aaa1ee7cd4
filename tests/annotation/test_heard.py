""" "Heard to the end" is the server's to check: a caption is refused for a clip whose audio
was not served to the assignment long enough ago to have played through (the HIT page's
player, the API, the MTurk page and the Prolific page record the first serving), and the
HIT page's "heard" report is refused before then too. The browser's lock is a
convenience, not the check."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db.models import F
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, Batch, Caption, ClipAudioServed, ClipListen
from annotation.services import HEARD_SHARE, assignment_submit, hit_claim
from curation.models import Clip
from tests.annotation.factories import CAPTION, MakeBatch, audio_get_served_writes, captions_for
from tests.conftest import login, wav_bytes

SECONDS = 10  # the test clips' section: 30 s to 40 s


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


@pytest.fixture
def assignment(batch: Batch, ann: Any, media: Path) -> Assignment:
    claimed = hit_claim(worker=ann)
    assert claimed is not None
    for hit_clip in claimed.hit.hit_clips.select_related("clip"):
        hit_clip.clip.audio.save(f"clip{hit_clip.clip_id}.wav", ContentFile(wav_bytes()))
    return claimed


def _clip(assignment: Assignment) -> Clip:
    return assignment.hit.hit_clips.get().clip


def _audio_url(assignment: Assignment) -> str:
    return reverse("assignment_clip_audio", args=[assignment.pk, _clip(assignment).pk])


def _time_passes(seconds: float) -> None:
    """As if the audio had been served `seconds` earlier than it was."""
    ClipAudioServed.objects.update(
        served_at=F("served_at") - timedelta(seconds=seconds),
        earliest_heard_at=F("earliest_heard_at") - timedelta(seconds=seconds),
        whole_at=F("whole_at") - timedelta(seconds=seconds),
    )


def _refusal(exc: pytest.ExceptionInfo[ValidationError], clip: Clip) -> list[str]:
    return exc.value.message_dict[f"caption-{clip.pk}"]


def test_a_caption_for_a_clip_never_played_is_refused(assignment: Assignment, ann: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        assignment_submit(assignment=assignment, worker=ann, captions=captions_for(assignment))
    assert _refusal(exc, _clip(assignment)) == ["Listen to clip 1 to the end first."]
    assert not Caption.objects.exists()
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.ACCEPTED


def test_a_caption_is_refused_until_the_clip_could_have_played_through(
    assignment: Assignment, ann: Any
) -> None:
    response = login(ann).get(_audio_url(assignment))
    assert response.status_code == 200
    served = ClipAudioServed.objects.get()
    too_soon = served.served_at + timedelta(seconds=HEARD_SHARE * SECONDS - 1)
    with pytest.raises(ValidationError, match="Listen to clip 1 to the end first"):
        assignment_submit(
            assignment=assignment, worker=ann, captions=captions_for(assignment), now=too_soon
        )
    after = served.served_at + timedelta(seconds=SECONDS)
    assignment_submit(
        assignment=assignment, worker=ann, captions=captions_for(assignment), now=after
    )
    assert Caption.objects.get().text == CAPTION


def test_only_the_first_serving_counts(assignment: Assignment, ann: Any) -> None:
    client = login(ann)
    client.get(_audio_url(assignment))
    first = ClipAudioServed.objects.get()
    _time_passes(300)
    client.get(_audio_url(assignment), headers={"Range": "bytes=0-3"})  # a replay
    again = ClipAudioServed.objects.get()
    assert again.served_at == first.served_at - timedelta(minutes=5)
    assert again.earliest_heard_at - again.served_at == timedelta(seconds=HEARD_SHARE * SECONDS)


def test_the_hit_pages_heard_report_is_refused_before_the_clip_could_have_played(
    assignment: Assignment, ann: Any
) -> None:
    client = login(ann)
    heard_url = reverse("assignment_clip_heard", args=[assignment.pk, _clip(assignment).pk])
    never_played = client.post(heard_url)
    assert never_played.status_code == 409
    assert "never loaded" in never_played.json()["error"]
    client.get(_audio_url(assignment))
    too_soon = client.post(heard_url)
    assert too_soon.status_code == 409
    assert "not played long enough" in too_soon.json()["error"]
    assert not ClipListen.objects.exists()
    _time_passes(SECONDS)
    assert client.post(heard_url).status_code == 200
    assert ClipListen.objects.get().clip == _clip(assignment)


def test_someone_elses_fetch_of_the_audio_counts_for_nothing(
    assignment: Assignment, abe: Any, ann: Any
) -> None:
    assert login(abe).get(_audio_url(assignment)).status_code == 404
    assert not ClipAudioServed.objects.exists()


def test_an_api_script_fetches_the_audio_then_submits_once_it_could_have_played(
    assignment: Assignment, ann: Any
) -> None:
    client = login(ann)
    clip = _clip(assignment)
    audio = f"/api/work/assignments/{assignment.pk}/clips/{clip.pk}/audio"
    submit = f"/api/work/assignments/{assignment.pk}/submit"
    body = json.dumps({"captions": {str(clip.pk): CAPTION}})
    assert client.get(audio).status_code == 200

    refused = client.post(submit, body, content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["errors"] == {
        f"caption-{clip.pk}": ["Listen to clip 1 to the end first."]
    }

    _time_passes(SECONDS)
    accepted = client.post(submit, body, content_type="application/json")
    assert accepted.status_code == 200, accepted.content


def test_a_multi_clip_hit_names_each_clip_not_yet_heard(
    make_batch: MakeBatch, ann: Any, media: Path
) -> None:
    make_batch(clips=2, clips_per_hit=2)
    assignment = hit_claim(worker=ann)
    assert assignment is not None
    first, second = assignment.hit.hit_clips.order_by("position").values_list("clip_id", flat=True)
    served_at = timezone.now() - timedelta(hours=1)
    ClipAudioServed.objects.create(
        assignment=assignment,
        clip_id=first,
        served_at=served_at,
        earliest_heard_at=served_at,
        whole_at=served_at,
    )
    with pytest.raises(ValidationError) as exc:
        assignment_submit(assignment=assignment, worker=ann, captions=captions_for(assignment))
    assert exc.value.message_dict == {f"caption-{second}": ["Listen to clip 2 to the end first."]}


def test_the_anonymous_cannot_fetch_audio_to_start_the_clock(assignment: Assignment) -> None:
    response = Client().get(_audio_url(assignment))
    assert response.status_code == 302
    assert not ClipAudioServed.objects.exists()


# Every byte, not one: the ranges served must cover the file ---------------------------


def _api_audio(assignment: Assignment) -> str:
    return f"/api/work/assignments/{assignment.pk}/clips/{_clip(assignment).pk}/audio"


def test_one_byte_of_the_clip_does_not_count_as_heard(assignment: Assignment, ann: Any) -> None:
    client = login(ann)
    assert client.get(_api_audio(assignment), headers={"Range": "bytes=0-0"}).status_code == 206
    _time_passes(SECONDS)
    with pytest.raises(ValidationError) as exc:
        assignment_submit(assignment=assignment, worker=ann, captions=captions_for(assignment))
    assert _refusal(exc, _clip(assignment)) == ["Listen to clip 1 to the end first."]


def test_ranges_that_add_up_to_the_file_count_as_heard(assignment: Assignment, ann: Any) -> None:
    client = login(ann)
    size = len(wav_bytes())
    for asked in ("bytes=100-", "bytes=0-49", f"bytes=40-{size // 2}"):  # out of order, overlapping
        assert client.get(_api_audio(assignment), headers={"Range": asked}).status_code == 206
    assert ClipAudioServed.objects.get().whole_at is not None
    _time_passes(SECONDS)
    assignment_submit(assignment=assignment, worker=ann, captions=captions_for(assignment))
    assert Caption.objects.get().text == CAPTION


def test_ranges_that_leave_a_gap_do_not_count(assignment: Assignment, ann: Any) -> None:
    client = login(ann)
    for asked in ("bytes=0-99", "bytes=101-"):  # byte 100 never served
        client.get(_api_audio(assignment), headers={"Range": asked})
    served = ClipAudioServed.objects.get()
    assert served.whole_at is None
    assert served.ranges == [[0, 99], [101, len(wav_bytes()) - 1]]


def test_the_clip_cannot_be_heard_before_its_last_byte_was_served(
    assignment: Assignment, ann: Any
) -> None:
    client = login(ann)
    client.get(_api_audio(assignment), headers={"Range": "bytes=0-9"})
    _time_passes(SECONDS)  # the first byte long ago, the rest only now
    client.get(_api_audio(assignment), headers={"Range": "bytes=10-"})
    served = ClipAudioServed.objects.get()
    assert served.whole_at is not None
    assert served.earliest_heard_at == served.whole_at
    assert served.served_at < served.whole_at - timedelta(seconds=SECONDS - 1)


def test_the_hit_pages_heard_report_is_refused_for_part_of_the_clip(
    assignment: Assignment, ann: Any
) -> None:
    client = login(ann)
    client.get(_audio_url(assignment), headers={"Range": "bytes=0-0"})
    _time_passes(SECONDS)
    heard_url = reverse("assignment_clip_heard", args=[assignment.pk, _clip(assignment).pk])
    refused = client.post(heard_url)
    assert refused.status_code == 409
    assert "Only part of this clip's audio" in refused.json()["error"]


def test_a_replay_of_a_clip_served_whole_writes_nothing(assignment: Assignment, ann: Any) -> None:
    client = login(ann)
    client.get(_api_audio(assignment))
    before = ClipAudioServed.objects.values().get()
    client.get(_api_audio(assignment))
    client.get(_api_audio(assignment), headers={"Range": "bytes=5-9"})
    assert ClipAudioServed.objects.values().get() == before


# The HIT page's audio writes the record for what it serves, not again for what it holds --


def test_the_hit_pages_first_get_records_the_clip_served_whole(
    assignment: Assignment, ann: Any
) -> None:
    assert len(audio_get_served_writes(login(ann), _audio_url(assignment))) == 1
    assert ClipAudioServed.objects.get().whole_at is not None


def test_a_replay_on_the_hit_page_writes_no_served_record(assignment: Assignment, ann: Any) -> None:
    client = login(ann)
    audio_get_served_writes(client, _audio_url(assignment))
    assert audio_get_served_writes(client, _audio_url(assignment)) == []


def test_a_range_inside_one_served_on_the_hit_page_writes_nothing(
    assignment: Assignment, ann: Any
) -> None:
    client = login(ann)
    assert audio_get_served_writes(client, _audio_url(assignment), "bytes=0-99")
    assert audio_get_served_writes(client, _audio_url(assignment), "bytes=10-50") == []
    assert ClipAudioServed.objects.get().ranges == [[0, 99]]
