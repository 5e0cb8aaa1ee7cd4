"""Failure 3: a runner that lost its job — swept while frozen, or taken over by another
execution — cannot write its outcome over the job's: every transition is a compare-and-set
on the job's state and on the execution token the runner got when it started."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from core.jobs import JOB_KINDS, JobKind
from core.models import Job
from core.services import Progress, job_create, job_run, jobs_fail_lost

pytestmark = pytest.mark.django_db

reached: list[str] = []  # what the handlers below got to do


def swept_meanwhile(*, job: Job, progress: Progress, then: str) -> dict[str, Any]:
    """As if the runner froze past its lease and the sweep ran; then it wakes up."""
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert jobs_fail_lost() == 1
    if then == "report":
        progress(1, 2, "awake again")
    reached.append("end")
    return {"done": True}


def taken_over(*, job: Job, progress: Progress) -> dict[str, Any]:
    """As if another worker had taken the job over (a new execution) while this one ran."""
    Job.objects.filter(pk=job.pk).update(execution="another-execution")
    reached.append("end")
    return {"done": True}


@pytest.fixture(autouse=True)
def kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, handler in [("rel_swept", swept_meanwhile), ("rel_taken", taken_over)]:
        spec = JobKind(name, f"{__name__}.{handler.__name__}", "text")
        monkeypatch.setitem(JOB_KINDS, name, spec)
    reached.clear()


def test_a_runner_swept_while_frozen_cannot_overwrite_failed_with_succeeded() -> None:
    job = job_create(kind="rel_swept", params={"then": "return"})

    job_run(job_id=job.pk, worker="celery@frozen")

    job.refresh_from_db()
    assert reached == ["end"]  # it finished its work …
    assert job.state == Job.State.FAILED  # … and its success was dropped
    assert "stopped renewing its lease" in job.error
    assert job.result == {}


def test_a_runner_swept_while_frozen_stops_at_its_next_progress_report() -> None:
    job = job_create(kind="rel_swept", params={"then": "report"})

    job_run(job_id=job.pk, worker="celery@frozen")

    job.refresh_from_db()
    assert reached == []
    assert job.state == Job.State.FAILED
    assert job.progress_message == ""  # the stale report wrote nothing


def test_a_runner_whose_job_was_taken_over_leaves_the_new_execution_alone() -> None:
    job = job_create(kind="rel_taken", params={})

    job_run(job_id=job.pk, worker="celery@old")

    job.refresh_from_db()
    assert reached == ["end"]
    assert (job.state, job.execution) == (Job.State.RUNNING, "another-execution")
    assert job.finished_at is None
