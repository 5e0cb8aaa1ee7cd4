"""A training run follows its job: core sends job_finished when a job ends, and a run still
queued or running for that job takes the job's end. A run whose worker died, whose lease
ran out or whose job was cancelled while queued is then failed or cancelled (and can
resume from its stored checkpoint) instead of staying `running` for good.

`run_succeeded` is sent when a training job (`training_run`: a run started or resumed on
its own) has trained and scored its run: an app above modeling that started the run for a
purpose of its own (active's retrains promote if better) finishes that purpose there.

Torch-free: connected when the app loads, in every process.
"""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

from core.models import Job
from modeling.models import TrainingRun

run_succeeded = Signal()  # kwargs: run (the TrainingRun, succeeded)


def run_follow_job(sender: Any = None, *, job: Job, **_: Any) -> int:
    if job.state == Job.State.CANCELLED:
        state, error = TrainingRun.State.CANCELLED, ""
    elif job.state == Job.State.FAILED:
        state, error = TrainingRun.State.FAILED, job.error or "Its job failed."
    else:  # a handler that returned without finishing the run
        state, error = TrainingRun.State.FAILED, f"Its job #{job.pk} ended without finishing it."
    return TrainingRun.objects.filter(
        job=job, state__in=[TrainingRun.State.QUEUED, TrainingRun.State.RUNNING]
    ).update(state=state, error=error, finished_at=job.finished_at)
