"""The supervisor `bin/earmark up` runs (`manage.py runstack`, core.supervisor) brings back
a cpu worker that died, and a job queued while it was down finishes; Ctrl-C then stops it
all (issue 31: the filesystem broker killed the cpu worker, nothing restarted it, and the
EXIT trap that should have stopped the rest had lost its pids)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from celery.utils.nodenames import host_format

from core.models import Job, ProcessExit, WorkerHeartbeat
from core.services import job_enqueue
from tests.conftest import ONTOLOGY_EXCERPT
from tests.reliability import processes

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _purge_queues() -> None:
    """Stale messages from an earlier run would name jobs this database does not have."""
    from earmark.celery import app

    app.control.purge()


def _alive_pid(hostname: str) -> int | None:
    beat = WorkerHeartbeat.alive().filter(hostname=hostname).first()
    return beat.pid if beat is not None else None


def test_a_killed_cpu_worker_is_started_again_and_a_job_queued_meanwhile_finishes(
    tmp_path: Path,
) -> None:
    _purge_queues()
    command = ["runstack", "--only", "worker-cpu", "--worker-concurrency", "1", "--log-dir"]
    stack = processes.start(["manage", *command, str(tmp_path)], env=processes.environment())
    hostname = host_format("cpu@%h")
    try:
        processes.wait_until(
            lambda: _alive_pid(hostname), what=f"a heartbeat from {hostname}", process=stack
        )
        first = _alive_pid(hostname)
        assert first is not None

        processes.signal_pid(first, signal.SIGKILL)
        processes.wait_until(
            lambda: ProcessExit.objects.filter(program="worker-cpu", pid=first).exists(),
            what="the supervisor recording the death",
            process=stack,
        )
        # queued while no worker serves its queue (one sent to the dying worker's connection
        # is the jobs-redispatch sweep's, tests/reliability/test_worker_faults.py)
        job = job_enqueue(kind="ontology_import", params={"path": str(ONTOLOGY_EXCERPT)})
        processes.wait_until(
            lambda: _alive_pid(hostname) not in (None, first),
            what="the cpu worker started again",
            process=stack,
        )
        job = processes.final(job, process=stack)
        assert job.state == Job.State.SUCCEEDED, f"{job.error}\n{stack.output()[-3000:]}"
        assert job.worker == hostname
        death = ProcessExit.objects.get(program="worker-cpu", pid=first)
        assert (death.returncode, death.ending) == (-signal.SIGKILL, "killed by SIGKILL")
        assert death.restart_delay == 1.0
        assert "celery@" in death.log_tail or "cpu@" in death.log_tail

        second = _alive_pid(hostname)
        assert second is not None
        stack.signal(signal.SIGINT)  # Ctrl-C
        assert stack.wait_exit(timeout=60) == 0
        with pytest.raises(ProcessLookupError):
            processes.signal_pid(second, 0)
        # its warm shutdown said so: no page counts it as serving its queues any more
        assert WorkerHeartbeat.objects.get(hostname=hostname).stopped_at is not None
        assert not WorkerHeartbeat.alive().filter(hostname=hostname).exists()
    finally:
        stack.stop()
