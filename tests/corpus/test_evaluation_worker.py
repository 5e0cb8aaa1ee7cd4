"""Evaluation jobs in a real Celery worker on the text queue (prefork, one child): the child
starts METEOR for the first job and the next job reuses that JVM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import IO, Any

import pytest
from django.conf import settings

from core.models import Job, Project
from core.services import job_enqueue
from tests.conftest import worker_database_url

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TIMEOUT_S = 180.0  # a cold METEOR JVM takes 10-40 s on a busy 2-core machine
PREDICTIONS = {"dog": "a dog barks", "rain": "rain falls on a roof"}
REFERENCES = {
    "dog": ["a dog is barking", "dogs bark loudly"],
    "rain": ["heavy rain falls", "rain hits a tin roof"],
}


@pytest.fixture(scope="module")
def worker(django_db_setup: None, django_db_blocker: Any) -> Iterator[IO[bytes]]:
    from earmark.celery import app

    with django_db_blocker.unblock():
        database_url = worker_database_url()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "earmark.settings_test",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    app.control.purge()
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed below)
    name = f"eval-{uuid.uuid4().hex[:12]}@%h"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "earmark", "worker", "-Q", "text", "-c", "1"),
            *("-n", name, "--without-mingle", "--without-gossip", "-l", "info"),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield log
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
    log.close()


def wait_for(job: Job, log: IO[bytes]) -> Job:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.is_finished:
            return job
        time.sleep(0.3)
    log.seek(0)
    pytest.fail(f"job #{job.pk} still {job.state}; worker output:\n{log.read().decode()}")


def test_it_keeps_meteor_warm_across_jobs_in_a_worker(
    worker: IO[bytes], project: Project, alice: Any
) -> None:
    results = []
    for _ in range(2):
        job = job_enqueue(
            kind="captions_evaluate",
            params={"predictions": PREDICTIONS, "references": REFERENCES},
            project=project,
            created_by=alice,
        )
        job = wait_for(job, worker)
        assert job.state == Job.State.SUCCEEDED, job.error
        results.append(job.result)
    first, second = (r["meteor_process"] for r in results)
    assert first["pid"] == second["pid"]
    assert first["starts"] == second["starts"] == 1
    assert results[0]["scores"] == results[1]["scores"]
