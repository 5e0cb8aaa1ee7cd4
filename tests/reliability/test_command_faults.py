"""Failure 2, management commands: a command running a job (`manage.py run_job`, every
JobCommand) that is stopped with Ctrl-C or SIGTERM records the job's end before it exits; one
killed outright leaves a job whose lease runs out, and the sweep ends it."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from core.models import Job
from core.services import job_create, jobs_fail_lost
from tests.reliability import processes
from tests.reliability.processes import LEASE_SECONDS, final, running

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def kinds(test_kinds: Callable[[str], None]) -> None:
    test_kinds("text")


def _command_running_a_job() -> tuple[processes.Process, Job]:
    job = job_create(kind="rel_sleep_once", params={"seconds": 60})
    command = processes.start(["manage", "run_job", str(job.pk)], env=processes.environment())
    return command, running(job, process=command)


@pytest.mark.parametrize(
    ("stop", "state", "error"),
    [
        (signal.SIGINT, Job.State.CANCELLED, "Interrupted (Ctrl-C)."),
        (signal.SIGTERM, Job.State.FAILED, "The process running it was stopped (SIGTERM)."),
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_a_stopped_command_records_how_its_job_ended(
    stop: signal.Signals, state: str, error: str
) -> None:
    command, job = _command_running_a_job()
    try:
        command.signal(stop)
        command.wait_exit(timeout=30)
    finally:
        command.stop()

    job.refresh_from_db()
    assert (job.state, job.error) == (state, error), command.output()[-3000:]
    assert job.finished_at is not None
    assert command.process.returncode != 0


def test_a_killed_commands_job_is_failed_by_the_sweep_once_its_lease_runs_out() -> None:
    command, job = _command_running_a_job()
    try:
        command.signal(signal.SIGKILL)
        command.wait_exit(timeout=30)
    finally:
        command.stop()
    assert jobs_fail_lost() == 0  # the lease is still current

    time.sleep(LEASE_SECONDS + 0.5)
    assert jobs_fail_lost() == 1

    job = final(job)
    assert job.state == Job.State.FAILED
    assert job.error == (
        f"The command (pid {command.process.pid}) stopped renewing its lease while running "
        "this job."
    )
