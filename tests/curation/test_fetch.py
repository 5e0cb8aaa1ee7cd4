"""Clip fetching on real yt-dlp and ffmpeg, against a local HTTP server standing in for YouTube.

CLIP_SOURCE_URL_TEMPLATE points yt-dlp at tests/curation/media_server.py, which serves
generated MP4s (25 s: a 440 Hz tone for 10 s, then 880 Hz) with Range support, and answers
404s, files cut short, silence and bytes that are not media. The last test runs a fetch job
on a real Celery worker process.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import yt_dlp
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection
from django.urls import reverse
from django.utils import timezone

from core.models import Job, Project, WorkerHeartbeat
from core.services import job_enqueue, job_run_inline
from curation import fetch
from curation.models import Clip, Recipe, Split, Subset, SubsetClip
from curation.services import ClipMediaBroken, clip_audio_check, clip_fetch, clips_fetch
from curation.tasks import fetch_clip
from earmark.env import env_float
from tests.conftest import login, worker_database_url
from tests.curation.media_server import MediaServer, Route, make_mp4, media_server

pytestmark = pytest.mark.django_db

# YouTube ids (11 characters) the server answers: a whole file, silence, 404, a file cut
# short, bytes that are not media; sound and picture apart
TONE, SILENT, GONE = "toneAAAAAAA", "quietAAAAAA", "goneAAAAAAA"
CUT, JUNK = "cutAAAAAAAA", "junkAAAAAAA"
AUDIO_ONLY, VIDEO_ONLY = "audioAAAAAA", "videoAAAAAA"
TALL = "tallAAAAAAA"  # a 640x480 picture, for features videos taller than the hint
# the test media switch from 440 Hz to 880 Hz at 10 s; clips take 10-20 s: all 880 Hz
START, END = 10, 20


@pytest.fixture(scope="session")
def source_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("source-media")
    files = {
        "tone": make_mp4(folder / "tone.mp4"),
        "tall": make_mp4(folder / "tall.mp4", size="640x480"),
        "silent": make_mp4(folder / "silent.mp4", silent=True),
        "junk": _write(folder / "junk.mp4", np.random.default_rng(7).bytes(50_000)),
    }
    # YouTube serves sound and picture as separate formats; yt-dlp merges them
    for name, keep in (("audio_only", "-vn"), ("video_only", "-an")):
        files[name] = folder / f"{name}.mp4"
        command = ["ffmpeg", "-v", "error", "-i", str(files["tone"]), keep, "-c", "copy"]
        command += ["-movflags", "+faststart", str(files[name])]
        subprocess.run(command, check=True, timeout=60)
    return files


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.fixture(scope="session")
def running_server() -> Iterator[MediaServer]:
    with media_server() as server:
        yield server


@pytest.fixture
def server(
    running_server: MediaServer, source_files: dict[str, Path], settings: Any
) -> MediaServer:
    """The server with the standard routes, fresh hit counts, and yt-dlp pointed at it."""
    tone = source_files["tone"]
    running_server.reset()
    running_server.routes.update(
        {
            TONE: Route(path=tone),
            SILENT: Route(path=source_files["silent"]),
            GONE: Route(status=404),
            # the first 60 % (≈15 s): yt-dlp exits 0 with a section half as long as asked
            CUT: Route(path=tone, cut_at=tone.stat().st_size * 6 // 10),
            JUNK: Route(path=source_files["junk"]),
        }
    )
    settings.CLIP_SOURCE_URL_TEMPLATE = running_server.url_template
    settings.FETCH_RATE_LIMIT_SECONDS = 0
    settings.FETCH_MAX_ATTEMPTS = 3
    return running_server


@pytest.fixture
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def _files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def _clip(youtube_id: str, **fields: Any) -> Clip:
    return Clip.objects.create(
        source=Clip.Source.YOUTUBE,
        segment_list=Clip.SegmentList.BALANCED,
        youtube_id=youtube_id,
        start_seconds=fields.pop("start_seconds", START),
        end_seconds=fields.pop("end_seconds", END),
        **fields,
    )


def _subset(project: Project, clips: list[Clip], slug: str = "to-fetch") -> Subset:
    subset = Subset.objects.create(project=project, name=slug.title(), slug=slug)
    SubsetClip.objects.bulk_create(
        [SubsetClip(subset=subset, clip=clip, split=Split.TRAIN) for clip in clips]
    )
    return subset


def _dominant_hz(wav: Path) -> float:
    samples, rate = sf.read(str(wav), dtype="float32")
    spectrum = np.abs(np.fft.rfft(samples))
    return float(np.fft.rfftfreq(samples.size, 1 / rate)[spectrum.argmax()])


# Success ----------------------------------------------------------------------------------


def test_it_fetches_a_clip_as_ready_32k_mono_wav_of_the_section_length(
    server: MediaServer, media_root: Path
) -> None:
    clip = clip_fetch(clip_id=_clip(TONE).pk)

    assert clip.status == Clip.Status.READY, clip.error
    info = sf.info(clip.audio.path)
    assert (info.samplerate, info.channels, info.subtype) == (32_000, 1, "PCM_16")
    assert info.duration == pytest.approx(END - START, abs=0.05)
    assert clip.duration_seconds == pytest.approx(END - START, abs=0.05)
    assert clip.sample_rate == 32_000


def test_it_cuts_only_the_requested_section(server: MediaServer, media_root: Path) -> None:
    clip = clip_fetch(clip_id=_clip(TONE).pk)

    # 880 Hz is only in the source after 10 s: a clip of 0-10 s would be 440 Hz
    assert _dominant_hz(Path(clip.audio.path)) == pytest.approx(880, abs=5)


def test_it_stores_a_small_144p_video_hint_without_sound(
    server: MediaServer, media_root: Path
) -> None:
    clip = clip_fetch(clip_id=_clip(TONE).pk)

    hint = Path(clip.video.path)
    assert 0 < hint.stat().st_size <= 200_000
    fields = "stream=codec_type,codec_name,height"
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", fields, "-of", "csv=p=0", str(hint)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.split() == ["h264,video,144"]  # one stream: no sound


def test_it_stores_media_under_media_root_with_peaks_and_hash(
    server: MediaServer, media_root: Path
) -> None:
    clip = clip_fetch(clip_id=_clip(TONE).pk)

    assert _files_under(media_root) == sorted([Path(clip.audio.path), Path(clip.video.path)])
    assert len(clip.peaks) == 400
    assert 0.3 < max(clip.peaks) <= 1.0
    assert clip.content_sha256 == fetch.media.sha256_of(Path(clip.audio.path))
    assert clip.fetched_at is not None
    assert clip.fetch_attempts == 1
    assert not clip.silent
    assert clip.error == ""


def test_it_merges_separate_audio_and_video_formats_as_from_youtube(
    server: MediaServer,
    source_files: dict[str, Path],
    media_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # what the YouTube extractor would return, as `yt-dlp --load-info-json` replays it
    server.routes[AUDIO_ONLY] = Route(path=source_files["audio_only"], content_type="audio/mp4")
    server.routes[VIDEO_ONLY] = Route(path=source_files["video_only"])
    formats = [
        {"format_id": "140", "ext": "m4a", "acodec": "mp4a.40.2", "vcodec": "none", "abr": 129},
        {"format_id": "160", "ext": "mp4", "acodec": "none", "vcodec": "avc1", "height": 240},
    ]
    for fmt, youtube_id in zip(formats, (AUDIO_ONLY, VIDEO_ONLY), strict=True):
        fmt.update(protocol="https", url=server.url_template.format(youtube_id=youtube_id))
    info = {
        "id": TONE,
        "title": "tone",
        "extractor": "youtube",
        "extractor_key": "Youtube",
        "webpage_url": f"https://www.youtube.com/watch?v={TONE}",
        "duration": 25,
        "formats": formats,
    }

    def extract_info(ydl: yt_dlp.YoutubeDL, url: str, download: bool = True, **_: Any) -> Any:
        return ydl.process_ie_result(dict(info), download=download)

    monkeypatch.setattr(yt_dlp.YoutubeDL, "extract_info", extract_info)

    clip = clip_fetch(clip_id=_clip(TONE).pk)

    assert clip.status == Clip.Status.READY, clip.error
    assert server.hits[AUDIO_ONLY] > 0
    assert server.hits[VIDEO_ONLY] > 0
    assert clip.duration_seconds == pytest.approx(END - START, abs=0.05)
    assert _dominant_hz(Path(clip.audio.path)) == pytest.approx(880, abs=5)
    assert 0 < Path(clip.video.path).stat().st_size <= 200_000


# A sharper video for features, when the recipe asks -----------------------------------------


def _stream(path: Path) -> list[str]:
    """codec,type,height of each stream: one video stream means no sound."""
    fields = "stream=codec_name,codec_type,height"
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", fields, "-of", "csv=p=0", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return probe.stdout.split()


def _recipe_subset(project: Project, clips: list[Clip], height: int | None) -> Subset:
    recipe = Recipe.objects.create(
        project=project, name="Sharp", slug="sharp", spec={"video_features_height": height}
    )
    subset = _subset(project, clips)
    subset.recipe = recipe
    subset.save(update_fields=["recipe"])
    return subset


def test_it_stores_a_features_video_as_tall_as_the_recipe_asks(
    server: MediaServer, media_root: Path, project: Project, source_files: dict[str, Path]
) -> None:
    server.routes[TALL] = Route(path=source_files["tall"])
    subset = _recipe_subset(project, [_clip(TALL)], 360)

    job = job_run_inline(
        kind="clips_fetch", params={"subset_id": subset.pk, "fan_out": False}, project=project
    )

    assert job.state == Job.State.SUCCEEDED, job.error
    clip = Clip.objects.get()
    assert clip.status == Clip.Status.READY, clip.error
    assert _stream(Path(clip.video_features.path)) == ["h264,video,360"]  # silent, 360p
    assert _stream(Path(clip.video.path)) == ["h264,video,144"]  # the hint as ever
    assert _files_under(media_root) == sorted(
        Path(f.path) for f in (clip.audio, clip.video, clip.video_features)
    )


def test_it_never_scales_the_features_video_up(
    server: MediaServer, media_root: Path, project: Project
) -> None:
    subset = _recipe_subset(project, [_clip(TONE)], 480)

    clips_fetch(subset=subset)

    clip = Clip.objects.get()
    assert _stream(Path(clip.video_features.path)) == ["h264,video,240"]  # the source's 240p


def test_it_follows_the_recipe_as_it_is_now(
    server: MediaServer, media_root: Path, project: Project
) -> None:
    subset = _recipe_subset(project, [_clip(TONE)], None)
    recipe = subset.recipe
    assert recipe is not None
    recipe.spec = {"video_features_height": 240}  # turned on after the build
    recipe.save(update_fields=["spec"])

    clips_fetch(subset=subset)

    assert _stream(Path(Clip.objects.get().video_features.path)) == ["h264,video,240"]


def test_it_stores_no_features_video_unless_asked(
    server: MediaServer, media_root: Path, project: Project
) -> None:
    subset = _recipe_subset(project, [_clip(TONE)], None)

    clips_fetch(subset=subset)

    clip = Clip.objects.get()
    assert clip.status == Clip.Status.READY, clip.error
    assert clip.video
    assert not clip.video_features
    assert _files_under(media_root) == sorted([Path(clip.audio.path), Path(clip.video.path)])


def test_a_fetch_task_passes_the_height_on(server: MediaServer, media_root: Path) -> None:
    clip = _clip(TONE)

    status = fetch_clip(clip.pk, 0, None, video_features_height=240)

    clip.refresh_from_db()
    assert status == Clip.Status.READY, clip.error
    assert _stream(Path(clip.video_features.path)) == ["h264,video,240"]


def test_it_fails_a_clip_whose_features_video_cannot_be_verified(
    server: MediaServer, media_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ffmpeg "succeeds" but the file holds no frames: verification, not exit codes, decides
    def broken(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if command[0] == django_settings.FFMPEG_BINARY and command[-1].endswith("features.mp4"):
            Path(command[-1]).write_bytes(b"\x00" * 1000)
            return subprocess.CompletedProcess(command, 0, "", "")
        return real_run(command, **kwargs)

    real_run = subprocess.run
    monkeypatch.setattr(fetch.subprocess, "run", broken)

    clip = clip_fetch(clip_id=_clip(TONE).pk, video_features_height=240)

    assert clip.status == Clip.Status.FAILED
    assert "not a readable video" in clip.error
    assert not clip.video_features
    assert not clip.audio
    assert _files_under(media_root) == []


def test_it_refuses_a_height_no_recipe_may_ask_for() -> None:
    with pytest.raises(ValueError, match="use one of 240, 360, 480"):
        fetch.source_format(1080)


def test_it_flags_a_silent_clip_but_keeps_it_ready(server: MediaServer, media_root: Path) -> None:
    clip = clip_fetch(clip_id=_clip(SILENT).pk)

    # policy: the clip exists, so it is ready; the flag lets curators leave it out
    assert clip.status == Clip.Status.READY, clip.error
    assert clip.silent
    assert max(clip.peaks) == 0


# Failures ---------------------------------------------------------------------------------


def test_it_marks_a_404_unavailable_with_yt_dlps_reason(
    server: MediaServer, media_root: Path
) -> None:
    clip = clip_fetch(clip_id=_clip(GONE).pk)

    assert clip.status == Clip.Status.UNAVAILABLE
    assert "HTTP Error 404" in clip.error
    assert not clip.audio
    assert _files_under(media_root) == []


def test_it_never_retries_an_unavailable_clip(server: MediaServer, media_root: Path) -> None:
    clip = clip_fetch(clip_id=_clip(GONE).pk)
    hits = server.hits[GONE]

    clips_fetch(clip_ids=[clip.pk])

    assert server.hits[GONE] == hits
    clip.refresh_from_db()
    assert clip.status == Clip.Status.UNAVAILABLE
    assert clip.fetch_attempts == 1


def test_it_fails_a_download_cut_short_and_never_marks_it_ready(
    server: MediaServer, media_root: Path
) -> None:
    clip = clip_fetch(clip_id=_clip(CUT).pk)

    assert clip.status == Clip.Status.FAILED
    assert "cut short" in clip.error
    assert "2 attempt(s) left" in clip.error
    assert clip.fetch_attempts == 1
    assert not clip.audio
    assert _files_under(media_root) == []


def test_it_fails_when_yt_dlp_succeeds_with_no_sound_of_the_section(
    server: MediaServer, source_files: dict[str, Path], media_root: Path
) -> None:
    tone = source_files["tone"]
    # the data ends before the section starts: yt-dlp exits 0 with little but a header
    server.routes[CUT] = Route(path=tone, cut_at=tone.stat().st_size * 3 // 10)

    clip = clip_fetch(clip_id=_clip(CUT).pk)

    assert clip.status == Clip.Status.FAILED
    assert clip.error.startswith("source.mp4: has no audio stream"), clip.error
    assert not clip.audio
    assert _files_under(media_root) == []


def test_it_fails_a_source_that_is_not_media(server: MediaServer, media_root: Path) -> None:
    clip = clip_fetch(clip_id=_clip(JUNK).pk)

    assert clip.status == Clip.Status.FAILED
    assert "ffmpeg" in clip.error
    assert _files_under(media_root) == []


def test_it_retries_a_failed_clip_once_the_source_is_whole(
    server: MediaServer, source_files: dict[str, Path], media_root: Path
) -> None:
    clip = clip_fetch(clip_id=_clip(CUT).pk)
    server.routes[CUT] = Route(path=source_files["tone"])

    clips_fetch(clip_ids=[clip.pk])

    clip.refresh_from_db()
    assert clip.status == Clip.Status.READY, clip.error
    assert clip.fetch_attempts == 2
    assert clip.error == ""


def test_it_stops_retrying_after_the_last_attempt(
    server: MediaServer, media_root: Path, settings: Any
) -> None:
    settings.FETCH_MAX_ATTEMPTS = 2
    clip = _clip(CUT)
    clips_fetch(clip_ids=[clip.pk])
    clips_fetch(clip_ids=[clip.pk])
    hits = server.hits[CUT]

    result = clips_fetch(clip_ids=[clip.pk])

    clip.refresh_from_db()
    assert server.hits[CUT] == hits
    assert clip.status == Clip.Status.FAILED
    assert clip.fetch_attempts == 2
    assert "no attempts left" in clip.error
    assert result["attempted"] == 0
    assert result["failed_no_attempts_left"] == 1


def test_a_researcher_gives_clips_out_of_attempts_a_fresh_set(
    server: MediaServer, media_root: Path, settings: Any
) -> None:
    settings.FETCH_MAX_ATTEMPTS = 1
    clip = _clip(CUT)
    clips_fetch(clip_ids=[clip.pk])
    hits = server.hits[CUT]

    result = clips_fetch(clip_ids=[clip.pk], retry_exhausted=True)

    clip.refresh_from_db()
    assert server.hits[CUT] > hits
    assert result["attempted"] == 1
    assert clip.fetch_attempts == 1  # one fresh attempt used, and failed again
    assert clip.status == Clip.Status.FAILED


def test_the_subset_page_offers_a_retry_for_clips_out_of_attempts(
    server: MediaServer, media_root: Path, settings: Any, project: Project
) -> None:
    settings.FETCH_MAX_ATTEMPTS = 1
    subset = _subset(project, [_clip(CUT), _clip(TONE)])
    clips_fetch(subset=subset)
    assert project.created_by is not None
    client = login(project.created_by)
    url = reverse("subset_detail", args=[project.slug, subset.slug])

    page = client.get(url).content.decode()
    client.post(reverse("subset_fetch", args=[project.slug, subset.slug]), {"retry_exhausted": "1"})

    assert "Retry 1 clip out of attempts" in page
    assert Job.objects.get(kind="clips_fetch").params == {
        "subset_id": subset.pk,
        "retry_exhausted": True,
    }


def test_it_stores_no_files_when_saving_the_clip_fails(
    server: MediaServer, media_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clip = _clip(TONE)
    save = Clip.save

    def failing_save(self: Clip, *args: Any, **kwargs: Any) -> None:
        if self.status == Clip.Status.READY:
            raise IntegrityError("simulated failure while marking the clip ready")
        save(self, *args, **kwargs)

    monkeypatch.setattr(Clip, "save", failing_save)

    clip = clip_fetch(clip_id=clip.pk)

    assert clip.status == Clip.Status.FAILED
    assert "simulated failure" in clip.error
    assert _files_under(media_root) == []


# Resuming and not repeating ---------------------------------------------------------------


def test_it_never_fetches_a_ready_clip_twice(
    server: MediaServer, media_root: Path, project: Project
) -> None:
    clip = _clip(TONE)
    subset = _subset(project, [clip])
    clips_fetch(subset=subset)
    hits = server.hits[TONE]

    result = clips_fetch(subset=subset)
    clip_fetch(clip_id=clip.pk)

    assert server.hits[TONE] == hits > 0
    assert result["already_ready"] == 1
    assert result["attempted"] == 0


def test_it_fetches_again_a_clip_whose_stored_audio_broke(
    server: MediaServer, media_root: Path, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.FETCH_MAX_ATTEMPTS = 1
    clip = clip_fetch(clip_id=_clip(TONE).pk)
    broken = Path(clip.audio.path)
    broken.write_bytes(b"")
    with pytest.raises(ClipMediaBroken):
        clip_audio_check(clip=clip)

    with django_capture_on_commit_callbacks(execute=True):
        again = clip_fetch(clip_id=clip.pk)  # its one attempt was a success: a new one

    assert again.status == Clip.Status.READY, again.error
    assert (again.error, again.media_broken_at) == ("", None)
    assert sf.info(again.audio.path).duration == pytest.approx(END - START, abs=0.05)
    assert not broken.exists()  # the emptied file went with the fetch's commit


def test_it_resumes_a_clip_left_fetching_by_a_dead_run(
    server: MediaServer, media_root: Path, project: Project
) -> None:
    stuck = _clip(
        TONE,
        status=Clip.Status.FETCHING,
        fetch_attempts=1,
        fetched_at=timezone.now() - timedelta(hours=1),
    )
    untouched = _clip(TONE, start_seconds=0, end_seconds=10)

    result = clips_fetch(subset=_subset(project, [stuck, untouched]))

    stuck.refresh_from_db()
    assert stuck.status == Clip.Status.READY, stuck.error
    assert stuck.fetch_attempts == 2  # the interrupted attempt counts
    assert result["ready"] == 2


def test_it_leaves_a_clip_another_worker_is_fetching_alone(
    server: MediaServer, media_root: Path
) -> None:
    clip = _clip(TONE, status=Clip.Status.FETCHING, fetch_attempts=1, fetched_at=timezone.now())

    clip = clip_fetch(clip_id=clip.pk)

    assert clip.status == Clip.Status.FETCHING
    assert server.hits[TONE] == 0


def test_it_waits_for_a_held_clip_and_takes_it_over_once_stale(
    server: MediaServer, media_root: Path
) -> None:
    clip = _clip(TONE, status=Clip.Status.FETCHING, fetch_attempts=1, fetched_at=timezone.now())

    clips_fetch(clip_ids=[clip.pk], stale_after=timedelta(seconds=1), poll_seconds=0.1)

    clip.refresh_from_db()
    assert clip.status == Clip.Status.READY, clip.error
    assert clip.fetch_attempts == 2


def test_it_skips_a_clip_another_worker_attempted_since_the_run_began(
    server: MediaServer, media_root: Path
) -> None:
    clip = _clip(CUT)
    clip_fetch(clip_id=clip.pk)  # another worker of the run: failed, attempts left
    hits = server.hits[CUT]

    clip = clip_fetch(clip_id=clip.pk, attempts=0)  # the run's ticket, from before that

    assert clip.fetch_attempts == 1
    assert server.hits[CUT] == hits


def test_it_spaces_downloads_by_the_rate_limit(
    server: MediaServer, media_root: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When each download may start is the pacer's to say; when the server first sees a
    # request also depends on how busy the machine is, so the starts are read off the
    # pacer (the real one, wrapped), and the server only confirms both clips were asked for.
    settings.FETCH_RATE_LIMIT_SECONDS = 1.0
    released: list[float] = []
    real_wait = fetch.pacer.wait

    def wait(interval: float) -> None:
        real_wait(interval)
        released.append(time.monotonic())

    monkeypatch.setattr(fetch.pacer, "wait", wait)
    clips_fetch(clip_ids=[_clip(GONE).pk, _clip(TONE).pk])

    assert len(released) == 2
    assert released[1] - released[0] >= 0.95
    assert server.hits[GONE] >= 1
    assert server.hits[TONE] >= 1


# Jobs and the command ---------------------------------------------------------------------


def test_it_reports_job_progress_over_every_clip_to_fetch(
    server: MediaServer, media_root: Path, project: Project
) -> None:
    subset = _subset(project, [_clip(TONE), _clip(GONE), _clip(SILENT)])

    job = job_run_inline(
        kind="clips_fetch", params={"subset_id": subset.pk, "fan_out": False}, project=project
    )

    assert job.state == Job.State.SUCCEEDED, job.error
    assert (job.progress_done, job.progress_total) == (3, 3)
    assert job.queue == "media"
    assert job.result["ready"] == 2
    assert job.result["silent"] == 1
    assert job.result["unavailable"] == 1


def test_it_fetches_at_the_sample_rate_of_the_subsets_project(
    server: MediaServer, media_root: Path, project: Project
) -> None:
    project.audio_sample_rate = 16_000
    project.save(update_fields=["audio_sample_rate"])
    subset = _subset(project, [_clip(TONE)])

    job = job_run_inline(
        kind="clips_fetch", params={"subset_id": subset.pk, "fan_out": False}, project=project
    )

    assert job.state == Job.State.SUCCEEDED, job.error
    clip = Clip.objects.get()
    assert clip.sample_rate == 16_000
    assert sf.info(clip.audio.path).samplerate == 16_000


def test_it_skips_a_fetch_task_whose_job_has_finished(
    server: MediaServer, media_root: Path
) -> None:
    clip = _clip(TONE)
    job = job_run_inline(kind="clips_fetch", params={"clip_ids": [], "fan_out": False})

    status = fetch_clip(clip.pk, 0, job.pk)  # a task still queued when its job finished

    assert status == "skipped"
    assert server.hits[TONE] == 0


def test_it_fetches_a_subset_from_the_command(
    server: MediaServer, media_root: Path, project: Project
) -> None:
    clip = _clip(TONE)
    _subset(project, [clip], slug="birds")
    out = io.StringIO()

    call_command("fetch_clips", "--subset", "birds", "--project", project.slug, stdout=out)

    clip.refresh_from_db()
    assert clip.status == Clip.Status.READY, clip.error
    assert "succeeded" in out.getvalue()
    assert "ready=1" in out.getvalue()


def test_it_fetches_single_clips_from_the_command(server: MediaServer, media_root: Path) -> None:
    clip = _clip(TONE)

    call_command("fetch_clips", "--clip", str(clip.pk), stdout=io.StringIO())

    clip.refresh_from_db()
    assert clip.status == Clip.Status.READY, clip.error


def test_it_names_an_unknown_subset_in_the_command(db: None) -> None:
    with pytest.raises(CommandError, match="No subset 'nope'"):
        call_command("fetch_clips", "--subset", "nope", stdout=io.StringIO())


# Classification and settings --------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "ERROR: [youtube] abcdefghijk: Video unavailable. This video has been removed by the user",
        "ERROR: [youtube] abcdefghijk: Private video. Sign in if you've been granted access",
        "ERROR: [youtube] abcdefghijk: Video unavailable. The uploader has not made this video "
        "available in your country",
        "ERROR: [youtube] abcdefghijk: Sign in to confirm your age. This video may be "
        "inappropriate for some users.",
        "ERROR: [generic] x: Unable to download webpage: HTTP Error 410: Gone",
    ],
)
def test_it_classifies_a_gone_video_as_unavailable(message: str) -> None:
    assert isinstance(fetch.classify(message), fetch.Unavailable)


@pytest.mark.parametrize(
    "message",
    [
        "ERROR: [youtube] abcdefghijk: Sign in to confirm you're not a bot.",
        "ERROR: [youtube] abcdefghijk: Unable to download webpage: HTTP Error 429: Too Many "
        "Requests",
        "ERROR: [youtube] abcdefghijk: Requested format is not available",
        "ERROR: unable to download video data: <urlopen error timed out>",
        "ERROR: ffmpeg exited with code 1",
    ],
)
def test_it_classifies_throttling_and_glitches_as_worth_retrying(message: str) -> None:
    assert isinstance(fetch.classify(message), fetch.FetchFailed)


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_it_refuses_a_malformed_rate_limit(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("FETCH_RATE_LIMIT_SECONDS", value)

    with pytest.raises(ImproperlyConfigured, match="FETCH_RATE_LIMIT_SECONDS"):
        env_float("FETCH_RATE_LIMIT_SECONDS", 1.0, minimum=0.0)


def test_it_refuses_a_source_template_without_the_id(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "earmark.settings_test",
        "EARMARK_VAR_DIR": str(tmp_path),
        "CLIP_SOURCE_URL_TEMPLATE": "https://example.org/watch",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=django_settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode != 0
    assert "CLIP_SOURCE_URL_TEMPLATE" in done.stderr
    assert "{youtube_id}" in done.stderr


# A real worker ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def media_worker(
    django_db_setup: None,
    django_db_blocker: Any,
    running_server: MediaServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen[bytes], Path, Any]]:
    """A prefork worker with two processes on the media queue: the job and a per-clip task
    can run side by side."""
    from earmark.celery import app

    media = tmp_path_factory.mktemp("worker-media")
    name = f"fetch-{uuid.uuid4().hex[:12]}@%h"
    with django_db_blocker.unblock():
        database_url = worker_database_url()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "earmark.settings_test",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        "CLIP_SOURCE_URL_TEMPLATE": running_server.url_template,
        "FETCH_RATE_LIMIT_SECONDS": "0",
        "MEDIA_ROOT": str(media),
        "WORKER_HEARTBEAT_SECONDS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    app.control.purge()  # stale messages would name jobs this database does not have
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed below)
    command = [sys.executable, "-m", "celery", "-A", "earmark", "worker", "-Q", "media"]
    command += ["-c", "2", "-n", name, "--without-mingle", "--without-gossip", "-l", "INFO"]
    process = subprocess.Popen(
        command, cwd=django_settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        yield process, media, log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        log.close()
        with django_db_blocker.unblock():
            WorkerHeartbeat.objects.filter(hostname__startswith=name.split("@")[0]).delete()
            connection.close()


def _output(log: Any) -> str:
    log.flush()
    log.seek(0)
    return log.read().decode(errors="replace")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_fetches_a_subset_on_a_real_media_worker(
    media_worker: tuple[subprocess.Popen[bytes], Path, Any],
    server: MediaServer,
    project: Project,
    settings: Any,
) -> None:
    process, media, log = media_worker
    settings.MEDIA_ROOT = media
    clips = [_clip(TONE), _clip(TONE, start_seconds=0, end_seconds=10), _clip(GONE)]
    subset = _subset(project, clips)

    job = job_enqueue(kind="clips_fetch", params={"subset_id": subset.pk}, project=project)
    deadline = time.monotonic() + 90
    while not job.is_finished and time.monotonic() < deadline:
        assert process.poll() is None, _output(log)
        time.sleep(0.2)
        job.refresh_from_db()

    assert job.state == Job.State.SUCCEEDED, f"{job.state} {job.error}\n{_output(log)}"
    assert (job.progress_done, job.progress_total) == (3, 3)
    statuses = sorted(Clip.objects.filter(pk__in=[c.pk for c in clips]).values_list("status"))
    assert statuses == [("ready",), ("ready",), ("unavailable",)]
    for clip in Clip.objects.filter(status=Clip.Status.READY):
        assert Path(clip.audio.path).is_file()
        assert Path(clip.audio.path).is_relative_to(media)
    assert "curation.tasks.fetch_clip" in _output(log)  # the job fanned out per-clip tasks
