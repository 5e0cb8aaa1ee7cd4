"""A real Celery worker process runs jobs from the configured broker against the test database.

The worker is a subprocess with the test settings, the broker of this test process and a
DATABASE_URL naming the database pytest-django created, so rows committed here (the tests
use transactional_db) are what it reads.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from celery.utils.nodenames import host_format
from django.conf import settings
from django.db import connection

from core.models import Job, WorkerHeartbeat
from core.services import job_enqueue
from curation.models import Label
from tests.conftest import ONTOLOGY_EXCERPT, worker_database_url

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

JOB_TIMEOUT_S = 60.0
QUEUES = "default,media,text"


def _purge_queues() -> None:
    """Stale messages from an earlier run would name jobs this database does not have."""
    from earmark.celery import app

    app.control.purge()


@dataclass
class Worker:
    hostname: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def wait_for(self, job: Job, *, timeout: float = JOB_TIMEOUT_S) -> Job:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.is_finished:
                return job
            if self.process.poll() is not None:
                pytest.fail(f"worker exited ({self.process.returncode}):\n{self.output()}")
            time.sleep(0.2)
        pytest.fail(
            f"job #{job.pk} still {job.state} after {timeout:.0f} s; worker output:\n"
            + self.output()
        )

    def heartbeat(self, *, timeout: float = 10.0) -> WorkerHeartbeat | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            beat = WorkerHeartbeat.objects.filter(hostname=self.hostname).first()
            if beat is not None:
                return beat
            time.sleep(0.2)
        return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # warm shutdown: heartbeat row removed
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.log.close()


@pytest.fixture(scope="module")
def worker(django_db_setup: None, django_db_blocker: Any) -> Iterator[Worker]:
    """One worker for the module: it reads whatever each test committed."""
    name = f"test-{uuid.uuid4().hex[:12]}@%h"
    with django_db_blocker.unblock():
        database_url = worker_database_url()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "earmark.settings_test",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "WORKER_HEARTBEAT_SECONDS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    _purge_queues()
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by Worker.stop)
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "earmark",
        "worker",
        "-Q",
        QUEUES,
        "-P",
        "solo",
        "-n",
        name,
        "--without-mingle",
        "--without-gossip",
        "-l",
        "INFO",
    ]
    process = subprocess.Popen(
        command, cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    running = Worker(hostname=host_format(name), process=process, log=log)
    try:
        yield running
    finally:
        running.stop()
        # a heartbeat written after the last test's flush must not leak into later tests
        with django_db_blocker.unblock():
            WorkerHeartbeat.objects.filter(hostname=running.hostname).delete()
            connection.close()  # opened outside any test: nothing else would close it


def test_it_runs_an_enqueued_job_to_success(worker: Worker) -> None:
    job = job_enqueue(kind="ontology_import", params={"path": str(ONTOLOGY_EXCERPT)})

    job = worker.wait_for(job)

    assert job.state == Job.State.SUCCEEDED, f"{job.error}\n{worker.output()}"
    assert job.worker == worker.hostname
    assert job.started_at is not None
    assert job.finished_at is not None
    assert job.result["created"] == Label.objects.count() > 0
    assert Label.objects.get(mid="/m/0bt9lr").children.filter(mid="/m/05tny_").exists()


def test_it_records_progress_of_a_worker_job(worker: Worker) -> None:
    job = worker.wait_for(
        job_enqueue(kind="ontology_import", params={"path": str(ONTOLOGY_EXCERPT)})
    )

    assert job.state == Job.State.SUCCEEDED, f"{job.error}\n{worker.output()}"
    assert job.progress_total
    assert job.progress_done == job.progress_total
    assert job.progress_message
    assert job.percent == 100


def test_it_writes_a_heartbeat_for_the_running_worker(worker: Worker) -> None:
    worker.wait_for(job_enqueue(kind="ontology_import", params={"path": str(ONTOLOGY_EXCERPT)}))

    beat = worker.heartbeat()

    assert beat is not None, worker.output()
    assert beat.pid == worker.process.pid
    # every worker serves the sweeps queue besides its own (core.signals.serve_sweeps)
    assert set(beat.queues.split(",")) == {*QUEUES.split(","), settings.SWEEPS_QUEUE}
    assert WorkerHeartbeat.alive().filter(hostname=worker.hostname).exists()


def test_it_fails_a_job_on_malformed_json_naming_the_file(worker: Worker, tmp_path: Path) -> None:
    broken = tmp_path / "broken_ontology.json"
    broken.write_text('[{"id": "/m/0bt9lr", "name": "Dog",', encoding="utf-8")

    job = worker.wait_for(job_enqueue(kind="ontology_import", params={"path": str(broken)}))

    assert job.state == Job.State.FAILED, worker.output()
    assert "broken_ontology.json" in job.error
    assert job.traceback
    assert job.worker == worker.hostname
    assert not Label.objects.exists()
