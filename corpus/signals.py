"""A snapshot follows its export job: core sends job_finished when a job ends, and a
snapshot still building for that job (the job failed before the build could record it, was
cancelled, or its runner was lost and the lease sweep ended it) fails with the job's reason,
instead of staying `building` for good. The snapshots sweep (corpus.services.janitor) does
the same for any it finds later.

Light: connected when the app loads, in every process.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from core.models import Job
from corpus.models import Snapshot


def snapshot_follow_job(sender: object = None, *, job: Job, **_: object) -> int:
    """core.execution.job_finished: a snapshot still building when its job ends (the job
    failed before the build could record it, was cancelled, or its runner was lost) fails
    with the job's reason. Returns how many."""
    return fail_building(Snapshot.objects.filter(job=job), job)


def fail_building(snapshots: QuerySet[Snapshot], job: Job) -> int:
    if job.state == Job.State.CANCELLED:
        error = "Its export job was cancelled."
    elif job.state == Job.State.FAILED:
        error = job.error or f"Its export job #{job.pk} failed."
    else:
        error = f"Its export job #{job.pk} ended without finishing it."
    return snapshots.filter(state=Snapshot.State.BUILDING).update(
        state=Snapshot.State.FAILED, error=error, finished_at=job.finished_at or timezone.now()
    )
