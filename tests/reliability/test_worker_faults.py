"""Failures 1-3 with real Celery worker processes: a job's database backend terminated, a
pool child killed with SIGKILL, a worker killed and restarted under the same name, a worker
frozen (SIGSTOP) past its lease and then resumed (SIGCONT). Each job reaches a final state
within seconds, not when someone notices, and a stale runner never overwrites the outcome.

The workers run with 2-second leases (processes.LEASE_SECONDS); the tests call the sweep
themselves rather than waiting for beat's minute.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.models import Job, WorkerHeartbeat
from core.services import job_enqueue, jobs_fail_lost
from tests.core.test_worker import _purge_queues
from tests.reliability import processes
from tests.reliability.processes import LEASE_SECONDS, Process, final, running

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def kinds_on(test_kinds: Callable[[str], None]) -> Callable[[Process], Process]:
    """Sends the test kinds' jobs to this worker's own queue."""

    def on(worker: Process) -> Process:
        test_kinds(worker.queue)
        return worker

    return on


@pytest.fixture(scope="module")
def environment(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, str]]:
    with django_db_blocker.unblock():
        env = processes.environment()
    _purge_queues()
    yield env
    with django_db_blocker.unblock():
        WorkerHeartbeat.objects.all().delete()  # rows written after the last test's flush
        connection.close()


def _worker(request: Any, environment: dict[str, str], pool: str) -> Iterator[Process]:
    """A worker for the module, started under the test database's access (heartbeats)."""
    blocker = request.getfixturevalue("django_db_blocker")
    name = f"rel-{pool}-{uuid.uuid4().hex[:8]}@%h"
    with blocker.unblock():
        worker = processes.start_worker(name, env=environment, pool=pool)
        connection.close()
    try:
        yield worker
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def solo(request: Any, environment: dict[str, str]) -> Iterator[Process]:
    yield from _worker(request, environment, "solo")


@pytest.fixture(scope="module")
def prefork(request: Any, environment: dict[str, str]) -> Iterator[Process]:
    yield from _worker(request, environment, "prefork")


# 1. The job's database backend is terminated ------------------------------------------


@pytest.mark.parametrize(("then", "state"), [("fail", "failed"), ("return", "succeeded")])
def test_a_worker_records_a_job_whose_database_backend_was_terminated(
    solo: Process, kinds_on: Callable[[Process], Process], then: str, state: str
) -> None:
    kinds_on(solo)
    job = job_enqueue(kind="rel_break_db", params={"then": then})

    job = final(job, process=solo, timeout=30)

    assert job.state == state, f"{job.error}\n{solo.output()[-3000:]}"


# 2. Liveness by execution, not by worker name -----------------------------------------


def test_a_killed_pool_child_hands_a_rerun_safe_job_to_its_replacement(
    prefork: Process, kinds_on: Callable[[Process], Process]
) -> None:
    kinds_on(prefork)
    job = running(job_enqueue(kind="rel_sleep_rerun", params={"seconds": 2}), process=prefork)
    child = job.runner_pid
    assert child is not None
    assert child != prefork.process.pid  # the pool child, not the worker

    processes.signal_pid(child, signal.SIGKILL)
    job = final(job, process=prefork, timeout=45)

    assert job.state == Job.State.SUCCEEDED, f"{job.error}\n{prefork.output()[-3000:]}"
    assert job.attempts == 2
    assert job.runner_pid != child
    assert f"(pid {child}) died while running this job. Running it again." in job.log


def test_a_killed_pool_child_fails_its_job_at_once(
    prefork: Process, kinds_on: Callable[[Process], Process]
) -> None:
    kinds_on(prefork)
    job = running(job_enqueue(kind="rel_sleep_once", params={"seconds": 60}), process=prefork)
    child = job.runner_pid
    assert child is not None
    killed_at = time.monotonic()

    processes.signal_pid(child, signal.SIGKILL)
    job = final(job, process=prefork, timeout=45)

    assert job.state == Job.State.FAILED
    assert job.error == f"Worker {prefork.hostname} (pid {child}) died while running this job."
    assert time.monotonic() - killed_at < 20  # the returned message, not a sweep, ended it


def test_a_worker_restarted_under_its_name_ends_the_job_it_was_running(
    environment: dict[str, str], kinds_on: Callable[[Process], Process]
) -> None:
    name = f"rel-restart-{uuid.uuid4().hex[:8]}@%h"
    first = kinds_on(processes.start_worker(name, env=environment))
    try:
        job = running(job_enqueue(kind="rel_sleep_once", params={"seconds": 60}), process=first)
        first.signal(signal.SIGKILL)
        first.process.wait(timeout=10)
    finally:
        first.stop()
    second = processes.start_worker(name, env=environment)
    try:
        job = final(job, process=second, timeout=20)
    finally:
        second.stop()

    assert job.state == Job.State.FAILED
    assert job.error == (
        f"Worker {second.hostname} (pid {first.process.pid}) was gone when the worker restarted."
    )


# 3. A frozen runner, swept, loses when it wakes up ------------------------------------


def test_a_frozen_worker_is_swept_and_cannot_overwrite_the_outcome_when_it_resumes(
    solo: Process, kinds_on: Callable[[Process], Process]
) -> None:
    kinds_on(solo)
    job = running(job_enqueue(kind="rel_sleep_once", params={"seconds": 10}), process=solo)
    solo.signal(signal.SIGSTOP)
    try:
        time.sleep(LEASE_SECONDS + 1)  # the frozen runner cannot renew its lease
        swept = jobs_fail_lost()
        job.refresh_from_db()
        assert swept == 1, (job.state, job.lease_expires_at, timezone.now())
    finally:
        solo.signal(signal.SIGCONT)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    swept_error = job.error

    # the resumed runner finds at its next progress report that it lost the job, and stops
    processes.wait_until(
        lambda: "lost the job; stopping" in solo.output(), what="the runner stopping", process=solo
    )
    job.refresh_from_db()
    assert (job.state, job.error) == (Job.State.FAILED, swept_error)
    assert "stopped renewing its lease while running this job" in swept_error
    # and the worker goes on with other jobs
    after = final(job_enqueue(kind="rel_sleep_once", params={"seconds": 0.2}), process=solo)
    assert after.state == Job.State.SUCCEEDED


# 4. Sweeps run on any live worker -----------------------------------------------------


def test_a_worker_serves_the_sweeps_queue_besides_the_queues_it_was_given(solo: Process) -> None:
    beats = WorkerHeartbeat.objects.filter(hostname=solo.hostname)
    processes.wait_until(beats.exists, what="a heartbeat", process=solo)  # after a flush
    beat = beats.get()
    assert set(beat.queues.split(",")) == {solo.queue, settings.SWEEPS_QUEUE}
