"""Fetching YouTube clips: claiming a due clip, fetching and storing its media, and
fetching a subset's clips across media workers (the clips_fetch job)."""

from __future__ import annotations

import logging
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import transaction
from django.utils import timezone

from core.models import Job
from core.progress import ProgressFn, no_progress
from curation import fetch, media
from curation.models import Clip, Subset

# A claim older than this belongs to a run that died (worker killed, machine lost): one
# fetch is bounded by yt-dlp's and ffmpeg's timeouts to a few minutes.
FETCH_STALE_AFTER = timedelta(minutes=15)
FETCH_POLL_SECONDS = 1.0

log = logging.getLogger(__name__)

# (clip id, its fetch_attempts when the run began) — see _clip_claim
FetchTicket = tuple[int, int]


def _clip_claim(*, clip_id: int, attempts: int | None, stale_after: timedelta) -> Clip | None:
    """Marks a due clip `fetching`, counting the attempt, and returns it; None when the clip
    is not due or another worker holds it.

    Due: pending; failed with attempts left; fetching for longer than `stale_after` (its
    run died). Counting at claim time means an interrupted attempt counts too, so a clip
    that kills its worker every time stops being retried. `attempts` is the clip's count
    when the caller's run began: a clip another worker of the same run has attempted
    since is left alone, so one run tries each clip once. `fetched_at` holds the claim
    time while fetching, and the time of the outcome afterwards.
    """
    now = timezone.now()
    with transaction.atomic():
        # skip_locked: two workers claiming the same clip must not queue on its row lock
        clip = Clip.objects.select_for_update(skip_locked=True).filter(pk=clip_id).first()
        if clip is None or clip.source != Clip.Source.YOUTUBE:
            return None
        if attempts is not None and clip.fetch_attempts != attempts:
            return None
        out_of_attempts = clip.fetch_attempts >= settings.FETCH_MAX_ATTEMPTS
        if clip.status == Clip.Status.FETCHING:
            if clip.fetched_at is not None and clip.fetched_at > now - stale_after:
                return None
            if out_of_attempts:
                clip.status = Clip.Status.FAILED
                clip.error = _fetch_failure_text(
                    "the fetch was interrupted (its worker stopped)", clip.fetch_attempts
                )
                clip.fetched_at = now
                clip.save(update_fields=["status", "error", "fetched_at"])
                return None
        elif clip.status == Clip.Status.FAILED:
            if out_of_attempts:
                return None
        elif clip.status != Clip.Status.PENDING:
            return None  # ready clips are never fetched twice; unavailable ones are gone
        clip.status = Clip.Status.FETCHING
        clip.fetch_attempts += 1
        clip.fetched_at = now
        clip.error = ""
        clip.save(update_fields=["status", "fetch_attempts", "fetched_at", "error"])
    return clip


def _fetch_failure_text(reason: str, attempts: int) -> str:
    left = settings.FETCH_MAX_ATTEMPTS - attempts
    tail = f"{left} attempt(s) left" if left > 0 else "no attempts left"
    return f"{reason} (attempt {attempts} of {settings.FETCH_MAX_ATTEMPTS}; {tail})"


def _fetch_is_ours(current: Clip, claimed: Clip) -> bool:
    """Whether our claim still stands: a claim taken over as stale must not be overwritten."""
    return (
        current.status == Clip.Status.FETCHING and current.fetch_attempts == claimed.fetch_attempts
    )


def _clip_settle(claimed: Clip, *, status: str, error: str) -> Clip:
    with transaction.atomic():
        clip = Clip.objects.select_for_update().get(pk=claimed.pk)
        if _fetch_is_ours(clip, claimed):
            clip.status = status
            clip.error = error
            clip.fetched_at = timezone.now()
            clip.save(update_fields=["status", "error", "fetched_at"])
    return clip


def _clip_store_fetched(claimed: Clip, fetched: fetch.FetchedClip) -> Clip:
    """Stores verified media through Django's storage and marks the clip ready, in one
    transaction; files stored before a failure are deleted, so no file lacks a row and
    no ready row lacks its files."""
    stem = f"{claimed.youtube_id}_{round(claimed.start_seconds * 1000)}"
    stored: list[Any] = []
    try:
        with transaction.atomic():
            clip = Clip.objects.select_for_update().get(pk=claimed.pk)
            if not _fetch_is_ours(clip, claimed):
                return clip  # reclaimed as stale meanwhile: the new holder's result counts
            replaced = [f.name for f in (clip.audio, clip.video, clip.video_features) if f]
            with fetched.audio.open("rb") as handle:
                clip.audio.save(f"{stem}.wav", File(handle), save=False)
                stored.append(clip.audio)
            if fetched.video is not None:
                with fetched.video.open("rb") as handle:
                    clip.video.save(f"{stem}.mp4", File(handle), save=False)
                    stored.append(clip.video)
            else:
                clip.video = ""
            if fetched.video_features is not None:
                with fetched.video_features.open("rb") as handle:
                    clip.video_features.save(f"{stem}.mp4", File(handle), save=False)
                    stored.append(clip.video_features)
            else:
                clip.video_features = ""
            clip.status = Clip.Status.READY
            clip.error = ""
            clip.media_broken_at = None  # a broken file replaced: its HITs are offered again
            clip.fetched_at = timezone.now()
            clip.duration_seconds = fetched.duration_seconds
            clip.sample_rate = fetched.sample_rate
            clip.peaks = fetched.peaks
            clip.content_sha256 = fetched.sha256
            clip.silent = fetched.silent
            clip.save()
            kept = {clip.audio.name, clip.video.name, clip.video_features.name}
            orphans = [name for name in replaced if name not in kept]
            if orphans:
                storage = clip.audio.storage
                transaction.on_commit(lambda: [storage.delete(name) for name in orphans])
    except Exception:
        for field_file in stored:
            field_file.storage.delete(field_file.name)
        raise
    return clip


def clip_fetch(
    *,
    clip_id: int,
    attempts: int | None = None,
    stale_after: timedelta = FETCH_STALE_AFTER,
    sample_rate: int = media.AUDIO_SAMPLE_RATE,
    video_features_height: int | None = None,
) -> Clip:
    """Fetches one YouTube clip if it is due (see _clip_claim) and returns it as it ends up,
    its audio as mono WAV at `sample_rate`; with `video_features_height`, also a silent
    video that tall for video features (Clip.video_features).

    Outcomes: ready, with the WAV, the video hint, peaks and the silence flag; unavailable,
    with yt-dlp's reason in `error`; failed, with the reason and the attempts left. A clip
    that is not due, or that another worker holds, is returned unchanged.
    """
    claimed = _clip_claim(clip_id=clip_id, attempts=attempts, stale_after=stale_after)
    if claimed is None:
        return Clip.objects.get(pk=clip_id)
    try:
        with tempfile.TemporaryDirectory(prefix="earmark-fetch-") as tmp:
            fetched = fetch.fetch_section(
                youtube_id=claimed.youtube_id,
                start=float(claimed.start_seconds),
                end=float(claimed.end_seconds),
                workdir=Path(tmp),
                sample_rate=sample_rate,
                video_features_height=video_features_height,
            )
            return _clip_store_fetched(claimed, fetched)
    except fetch.Unavailable as exc:
        return _clip_settle(claimed, status=Clip.Status.UNAVAILABLE, error=exc.reason)
    except fetch.FetchFailed as exc:
        error = _fetch_failure_text(exc.reason, claimed.fetch_attempts)
        return _clip_settle(claimed, status=Clip.Status.FAILED, error=error)
    except Exception as exc:
        # a bug or a storage fault must not leave the clip "fetching" until it goes stale
        log.exception("fetching clip %s failed", clip_id)
        error = _fetch_failure_text(f"{type(exc).__name__}: {exc}", claimed.fetch_attempts)
        return _clip_settle(claimed, status=Clip.Status.FAILED, error=error)


def subset_video_features_height(subset: Subset) -> int | None:
    """The features video height the subset's recipe asks for: the recipe as it is now, so
    a researcher can turn it on without rebuilding (it selects nothing), or the spec the
    subset was built from when its recipe is gone. Like the sample rate, it applies to
    clips fetched from now on; a ready clip is never fetched again."""
    spec = subset.recipe.spec if subset.recipe is not None else subset.spec
    height = spec.get("video_features_height")
    return height if isinstance(height, int) and not isinstance(height, bool) else None


def _fetch_settled(clip: Clip, attempts: int) -> bool:
    """Whether the clip is done with for this run: gone or ready, or attempted since the
    run began (`attempts` then) and no longer in the hands of a worker."""
    if clip.status in (Clip.Status.READY, Clip.Status.UNAVAILABLE):
        return True
    return clip.fetch_attempts > attempts and clip.status != Clip.Status.FETCHING


def clips_fetch(
    *,
    subset: Subset | None = None,
    clip_ids: Iterable[int] | None = None,
    progress: ProgressFn = no_progress,
    enlist: Callable[[list[FetchTicket]], None] | None = None,
    stale_after: timedelta = FETCH_STALE_AFTER,
    poll_seconds: float = FETCH_POLL_SECONDS,
    sample_rate: int | None = None,
    video_features_height: int | None = None,
    retry_exhausted: bool = False,
) -> dict[str, int]:
    """Fetches every YouTube clip of the subset (or of `clip_ids`, or both: their overlap)
    that is due, and waits until each is settled. Resumable: ready and unavailable clips
    are skipped, failed ones are retried while attempts are left, and clips stuck
    `fetching` by a run that died are taken over once stale.

    `enlist`, when given, receives the run's tickets to hand to other workers (the job
    sends one Celery task per clip); this process fetches too, so the run finishes
    even when nobody else helps. Progress counts settled clips, whoever fetched them.
    """
    if subset is None and clip_ids is None:
        raise ValidationError("Name a subset or clips to fetch.")
    if sample_rate is None:
        # clips are shared between projects; the subset's project decides, the first
        # time a clip is fetched (a ready clip is never fetched again)
        sample_rate = subset.project.audio_sample_rate if subset else media.AUDIO_SAMPLE_RATE
    if video_features_height is None and subset is not None:
        video_features_height = subset_video_features_height(subset)
    clips = Clip.objects.filter(source=Clip.Source.YOUTUBE)
    if subset is not None:
        clips = clips.filter(subsets=subset)
    if clip_ids is not None:
        wanted = set(clip_ids)
        known = set(Clip.objects.filter(pk__in=wanted).values_list("pk", flat=True))
        if wanted - known:
            raise ValidationError(f"Unknown clip id(s): {sorted(wanted - known)}.")
        clips = clips.filter(pk__in=wanted)
    if retry_exhausted:
        # a researcher's explicit second chance (the source is back, the block lifted):
        # failed clips out of attempts get a full set again
        clips.filter(
            status=Clip.Status.FAILED, fetch_attempts__gte=settings.FETCH_MAX_ATTEMPTS
        ).update(fetch_attempts=0)
    rows = list(clips.order_by("pk").values_list("pk", "status", "fetch_attempts"))
    already_ready = sum(1 for _, status, _ in rows if status == Clip.Status.READY)
    tickets: list[FetchTicket] = [
        (pk, attempts)
        for pk, status, attempts in rows
        if status in (Clip.Status.PENDING, Clip.Status.FETCHING)
        or (status == Clip.Status.FAILED and attempts < settings.FETCH_MAX_ATTEMPTS)
    ]
    total = len(tickets)
    progress(0, total, f"{total} of {len(rows)} clip(s) to fetch")
    if enlist is not None and tickets:
        enlist(tickets)

    settled = 0
    waiting: dict[int, int] = {}
    for pk, attempts in tickets:
        try:
            clip = clip_fetch(
                clip_id=pk,
                attempts=attempts,
                stale_after=stale_after,
                sample_rate=sample_rate,
                video_features_height=video_features_height,
            )
        except Clip.DoesNotExist:
            settled += 1  # deleted meanwhile: nothing left to fetch
            continue
        if _fetch_settled(clip, attempts):
            settled += 1
        else:
            waiting[pk] = attempts  # another worker holds it, or is claiming it right now
        progress(settled, total, f"{clip}: {clip.get_status_display().lower()}")

    while waiting:
        progress(settled, total, f"waiting for {len(waiting)} clip(s) other workers are fetching")
        time.sleep(poll_seconds)
        current = {clip.pk: clip for clip in Clip.objects.filter(pk__in=list(waiting))}
        for pk, attempts in list(waiting.items()):
            latest = current.get(pk)  # None: deleted meanwhile
            if latest is not None and not _fetch_settled(latest, attempts):
                # take over a claim that went stale (its worker died); else a no-op
                token = latest.fetch_attempts if latest.status == Clip.Status.FETCHING else attempts
                try:
                    latest = clip_fetch(
                        clip_id=pk,
                        attempts=token,
                        stale_after=stale_after,
                        sample_rate=sample_rate,
                        video_features_height=video_features_height,
                    )
                except Clip.DoesNotExist:
                    latest = None
            if latest is None or _fetch_settled(latest, attempts):
                settled += 1
                del waiting[pk]
    progress(total, total, "done")

    final = Counter(clips.values_list("status", flat=True))
    return {
        "clips": len(rows),
        "attempted": total,
        "already_ready": already_ready,
        "ready": final[Clip.Status.READY],
        "silent": clips.filter(status=Clip.Status.READY, silent=True).count(),
        "unavailable": final[Clip.Status.UNAVAILABLE],
        "failed": final[Clip.Status.FAILED],
        "failed_no_attempts_left": clips.filter(
            status=Clip.Status.FAILED, fetch_attempts__gte=settings.FETCH_MAX_ATTEMPTS
        ).count(),
    }


def clips_fetch_job(
    *,
    job: Job,
    progress: ProgressFn,
    subset_id: int | None = None,
    clip_ids: list[int] | None = None,
    fan_out: bool = True,
    retry_exhausted: bool = False,
) -> dict[str, int]:
    """The "clips_fetch" job (media queue).

    Design: the job fetches clip after clip itself and, with `fan_out`, also sends one
    `curation.tasks.fetch_clip` task per clip to the media queue, so every free media
    worker process joins in. Concurrency is therefore the number of media worker
    processes (`celery -A earmark worker -Q media -c N`), with no second setting to keep
    in step. Claims go through the database (skip_locked), so each clip is fetched by
    exactly one process, and the job, which waits for clips others hold, reports
    progress over all of them — a true progress bar. With a single worker process the
    job does all the work and the queued tasks find nothing left; tasks that arrive
    after the job finished or was cancelled do nothing.
    """
    subset = None
    if subset_id is not None:
        subset = Subset.objects.filter(pk=subset_id).first()
        if subset is None:
            raise ValidationError(f"Subset #{subset_id} no longer exists.")

    sample_rate = subset.project.audio_sample_rate if subset else media.AUDIO_SAMPLE_RATE
    height = subset_video_features_height(subset) if subset else None

    def enlist(tickets: list[FetchTicket]) -> None:
        from curation.tasks import fetch_clip

        options = {"sample_rate": sample_rate, "video_features_height": height}
        for clip_id, attempts in tickets:
            fetch_clip.apply_async(args=(clip_id, attempts, job.pk), kwargs=options, queue="media")

    return clips_fetch(
        subset=subset,
        clip_ids=clip_ids,
        progress=progress,
        enlist=enlist if fan_out else None,
        sample_rate=sample_rate,
        video_features_height=height,
        retry_exhausted=retry_exhausted,
    )
