"""Failure 1: a job's database connection dies under it (PostgreSQL restarted, its backend
terminated). The outcome is still recorded, on a fresh connection, instead of the job
staying `running` forever (and, for batch_flag, keeping flags_sweep off its batch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import OperationalError, transaction

from core.models import Job
from core.services import job_create, job_enqueue, job_lifecycle, job_run
from core.tasks import run_job
from tests.reliability.kinds import postgresql_only

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def kinds(test_kinds: Callable[[str], None]) -> None:
    test_kinds("text")


def test_a_job_whose_connection_is_terminated_mid_work_is_recorded_failed() -> None:
    job = job_create(kind="rel_break_db", params={"then": "fail"})

    job_run(job_id=job.pk, worker="celery@test")

    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert job.finished_at is not None
    assert "in break_db" in job.traceback  # the handler's own query met the dead connection
    assert job.error


def test_a_job_whose_connection_died_after_its_work_is_recorded_succeeded() -> None:
    job = job_create(kind="rel_break_db", params={"then": "return"})

    job_run(job_id=job.pk, worker="celery@test")

    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED
    assert job.result == {"then": "return"}


def test_recording_the_outcome_is_retried_while_the_database_is_away(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = job_create(kind="rel_sleep_once", params={"seconds": 0})
    refused: list[str] = []
    save = Job.save

    def flaky_save(self: Job, *args: Any, **kwargs: Any) -> None:
        if self.state in Job.FINISHED_STATES and len(refused) < 2:
            refused.append(self.state)
            raise OperationalError("the database system is starting up")
        save(self, *args, **kwargs)

    monkeypatch.setattr(Job, "save", flaky_save)
    monkeypatch.setattr(job_lifecycle.time, "sleep", lambda seconds: None)

    job_run(job_id=job.pk)

    job.refresh_from_db()
    assert refused == [Job.State.SUCCEEDED, Job.State.SUCCEEDED]
    assert job.state == Job.State.SUCCEEDED


# Riding a dropped connection out ---------------------------------------------------------


@postgresql_only
def test_a_progress_report_on_a_dropped_connection_is_made_on_a_fresh_one() -> None:
    job = job_create(kind="rel_break_db", params={"then": "report"})

    job_run(job_id=job.pk, worker="celery@test")

    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.progress_message == "reported after the outage"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The job ids sent to a queue (no broker: the test runs them by hand)."""
    ids: list[int] = []
    monkeypatch.setattr(run_job, "apply_async", lambda **kwargs: ids.append(kwargs["args"][0]))
    return ids


@postgresql_only
def test_a_rerun_safe_job_that_lost_its_connection_is_queued_again(sent: list[int]) -> None:
    with transaction.atomic():
        job = job_enqueue(kind="rel_break_db_rerun", params={"then": "fail"})
    assert sent == [job.pk]

    job_run(job_id=job.pk, worker="celery@test")

    job.refresh_from_db()
    assert job.state == Job.State.QUEUED, job.error
    assert job.attempts == 1
    assert job.execution == ""
    assert "Its database connection was lost" in job.log
    assert "Queued again (attempt 2)." in job.log
    assert sent == [job.pk, job.pk]  # sent to its queue again


@postgresql_only
def test_a_rerun_safe_job_that_lost_its_connection_on_its_last_attempt_fails(
    sent: list[int], settings: Any
) -> None:
    with transaction.atomic():
        job = job_enqueue(kind="rel_break_db_rerun", params={"then": "fail"})
    Job.objects.filter(pk=job.pk).update(attempts=settings.JOB_MAX_ATTEMPTS - 1)

    job_run(job_id=job.pk, worker="celery@test")

    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert job.attempts == settings.JOB_MAX_ATTEMPTS
    assert "in break_db" in job.traceback
    assert sent == [job.pk]
