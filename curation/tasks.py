"""Celery tasks of curation. Thin: each calls one service."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="curation.tasks.fetch_clip")
def fetch_clip(
    clip_id: int,
    attempts: int | None = None,
    job_id: int | None = None,
    sample_rate: int = 32_000,
    video_features_height: int | None = None,
) -> str:
    """Fetches one clip for a "clips_fetch" job (see curation.services.fetching.clips_fetch_job).

    Returns the clip's status. A task whose job already finished, or is being cancelled,
    does nothing: the job has settled the clip, or is being stopped on purpose.
    """
    from core.models import Job
    from curation.services.fetching import clip_fetch

    if job_id is not None:
        running = Job.objects.filter(pk=job_id, state=Job.State.RUNNING, cancel_requested=False)
        if not running.exists():
            return "skipped"
    return clip_fetch(
        clip_id=clip_id,
        attempts=attempts,
        sample_rate=sample_rate,
        video_features_height=video_features_height,
    ).status
