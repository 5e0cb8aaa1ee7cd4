"""Checking a clip's stored audio before it is served (curation.services.clip_media): a
file deleted, emptied, overwritten or cut short since the clip was ready fails the clip
with the reason; a playable one passes, and its header is read once an hour at most."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile

from curation.models import Clip
from curation.services import (
    ClipMediaBroken,
    clip_audio_check,
    clip_audio_problem,
    clip_mark_broken,
    clip_video_problem,
)
from tests.conftest import wav_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def _ready_clip(source: str = Clip.Source.YOUTUBE, seconds: float = 2.0) -> Clip:
    clip = Clip(
        source=source,
        youtube_id="abcdefghijk" if source == Clip.Source.YOUTUBE else "",
        original_name="" if source == Clip.Source.YOUTUBE else "kettle.wav",
        status=Clip.Status.READY,
        duration_seconds=seconds,
        fetch_attempts=3,
    )
    clip.audio.save("clip.wav", ContentFile(wav_bytes(seconds=seconds)), save=False)
    clip.save()
    return clip


def _overwrite(clip: Clip, content: bytes | None) -> None:
    stored = Path(clip.audio.path)
    if content is None:
        stored.unlink()
    else:
        stored.write_bytes(content)


def test_it_passes_a_playable_file(media: Path) -> None:
    clip = _ready_clip()

    assert clip_audio_problem(clip) is None
    clip_audio_check(clip=clip)
    clip.refresh_from_db()
    assert (clip.status, clip.media_broken_at) == (Clip.Status.READY, None)


def test_a_clip_without_audio_yet_is_not_broken(db: None) -> None:
    clip = Clip.objects.create(source=Clip.Source.YOUTUBE, youtube_id="abcdefghijk")

    assert clip_audio_problem(clip) is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "is missing from storage"),
        (b"", "is empty (0 bytes)"),
        (b"RIFF" + bytes(1000), "is not readable audio ("),
        (wav_bytes(seconds=0.0), "holds no samples"),
        (wav_bytes(seconds=2.0)[:8044], "holds 0.50 s of audio, not the 2.00 s stored"),
    ],
    ids=["deleted", "empty", "not audio", "no samples", "cut short"],
)
def test_it_finds_what_broke_in_a_stored_file(
    media: Path, content: bytes | None, problem: str
) -> None:
    clip = _ready_clip()
    _overwrite(clip, content)

    found = clip_audio_problem(clip)

    assert found is not None
    assert found.startswith(f"its audio file {clip.audio.name} {problem}")


def test_checking_a_broken_file_fails_the_clip_with_the_reason(media: Path) -> None:
    clip = _ready_clip()
    _overwrite(clip, b"")

    with pytest.raises(ClipMediaBroken) as raised:
        clip_audio_check(clip=clip)

    reason = f"its audio file {clip.audio.name} is empty (0 bytes)"
    assert str(raised.value) == (
        f"The audio of clip {clip.pk} cannot be played: {reason}. The clip is marked failed "
        "and is no longer offered for captioning."
    )
    clip.refresh_from_db()
    assert clip.status == Clip.Status.FAILED
    assert clip.error == (
        f"Broken after it was stored: {reason}; fetch it again (fetch_clips or Fetch clips "
        "on its subset)."
    )
    assert clip.media_broken_at is not None
    assert clip.fetch_attempts == 0  # a fresh set of attempts to fetch it again


def test_a_broken_local_clip_says_to_import_the_file_again(media: Path) -> None:
    clip = _ready_clip(source=Clip.Source.LOCAL)
    _overwrite(clip, None)

    with pytest.raises(ClipMediaBroken):
        clip_audio_check(clip=clip)

    clip.refresh_from_db()
    assert clip.error.endswith("is missing from storage; import the same file again to restore it.")


def test_it_reads_a_checked_files_header_once_an_hour_but_its_size_every_time(
    media: Path,
) -> None:
    clip = _ready_clip()
    assert clip_audio_problem(clip) is None
    good = Path(clip.audio.path).read_bytes()

    _overwrite(clip, bytes(len(good)))  # same size: the header is not read again
    assert clip_audio_problem(clip) is None
    _overwrite(clip, b"")  # another size: read again
    assert clip_audio_problem(clip) == f"its audio file {clip.audio.name} is empty (0 bytes)"


def test_it_leaves_a_clip_that_got_another_file_meanwhile_alone(media: Path) -> None:
    clip = _ready_clip()
    stale = Clip.objects.get(pk=clip.pk)
    clip.audio.save("refetched.wav", ContentFile(wav_bytes(seconds=2.0)))

    clip_mark_broken(clip=stale, reason="its audio file clips/audio/clip.wav is empty")

    clip.refresh_from_db()
    assert (clip.status, clip.media_broken_at) == (Clip.Status.READY, None)


def test_it_finds_a_deleted_or_empty_video_hint(media: Path) -> None:
    clip = _ready_clip()
    assert clip_video_problem(clip) is None  # no video hint: nothing to check
    clip.video.save("hint.mp4", ContentFile(b"\x00\x00\x00\x18ftypmp42"))
    assert clip_video_problem(clip) is None

    Path(clip.video.path).write_bytes(b"")
    assert clip_video_problem(clip) == f"its video hint {clip.video.name} is empty (0 bytes)"
    Path(clip.video.path).unlink()
    assert clip_video_problem(clip) == f"its video hint {clip.video.name} is missing from storage"
