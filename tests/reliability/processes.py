"""Processes the reliability tests start and hurt: Celery workers and management commands
running with the test kinds (see tests.reliability.launch), against the test database and
the test broker, with short leases and heartbeats so faults show within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

import pytest
from celery.utils.nodenames import host_format
from django.conf import settings

from core.models import Job
from tests.conftest import worker_database_url

LEASE_SECONDS = 2  # JOB_LEASE_SECONDS of the processes started here
WAIT_S = 60.0


def environment() -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "earmark.settings_test",
        "DATABASE_URL": worker_database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "WORKER_HEARTBEAT_SECONDS": "1",
        "JOB_LEASE_SECONDS": str(LEASE_SECONDS),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    return env


@dataclass
class Process:
    process: subprocess.Popen[bytes]
    log: IO[bytes] = field(repr=False)
    hostname: str = ""
    queue: str = ""  # a worker's own queue: no other worker takes its jobs

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def signal(self, number: int) -> None:
        os.kill(self.process.pid, number)

    def wait_exit(self, *, timeout: float) -> int:
        """The process's exit code once it ends; a process still running after `timeout`
        fails the test with what it printed (e.g. a Ctrl-C Python swallowed in a finaliser,
        "Exception ignored in ...")."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"pid {self.process.pid} ({self.hostname or 'a command'}) still running "
                f"{timeout:.0f} s after the signal; its output:\n{self.output()[-3000:]}"
            )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # in case a test left it stopped
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.log.close()


def start(args: list[str], *, env: dict[str, str], hostname: str = "") -> Process:
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by Process.stop)
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.launch", *args],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return Process(process=process, log=log, hostname=hostname)


def start_worker(name: str, *, env: dict[str, str], pool: str = "solo") -> Process:
    """A worker serving a queue of its own, named after it (and, as every worker, the
    sweeps queue); returns once its heartbeat is in the database."""
    from core.models import WorkerHeartbeat

    queue = f"rel-{uuid.uuid4().hex[:12]}"  # Job.queue holds 20 characters
    args = ["celery", "-A", "earmark", "worker", "-Q", queue, "-P", pool, "-n", name]
    if pool == "prefork":
        args += ["-c", "1"]
    args += ["--without-mingle", "--without-gossip", "-l", "INFO"]
    worker = start(args, env=env, hostname=host_format(name))
    worker.queue = queue
    wait_until(
        lambda: WorkerHeartbeat.objects.filter(hostname=worker.hostname).exists(),
        what=f"a heartbeat from {worker.hostname}",
        process=worker,
    )
    return worker


def wait_until(
    condition: Callable[[], object],
    *,
    what: str,
    process: Process | None = None,
    timeout: float = WAIT_S,
    expect_exit: bool = False,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if process is not None and not expect_exit and process.process.poll() is not None:
            pytest.fail(
                f"{what}: the process exited ({process.process.returncode}):\n" + process.output()
            )
        time.sleep(0.1)
    tail = process.output()[-4000:] if process is not None else ""
    pytest.fail(f"no {what} after {timeout:.0f} s\n{tail}")


def running(job: Job, *, process: Process | None = None) -> Job:
    """Waits until the job runs and has reported progress; returns it as stored."""

    def started() -> bool:
        job.refresh_from_db()
        return job.state == Job.State.RUNNING and job.progress_done > 0

    wait_until(started, what=f"progress of running job #{job.pk}", process=process)
    return job


def final(job: Job, *, process: Process | None = None, timeout: float = WAIT_S) -> Job:
    def finished() -> bool:
        job.refresh_from_db()
        return job.is_finished

    wait_until(
        finished,
        what=f"final state of job #{job.pk}",
        process=process,
        timeout=timeout,
        expect_exit=True,
    )
    return job


def signal_pid(pid: int, number: int) -> None:
    os.kill(pid, number)
