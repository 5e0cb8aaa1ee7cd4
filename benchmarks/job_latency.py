"""Job round trip through a real Celery worker: enqueue → running → succeeded.

Usage: .venv/bin/python benchmarks/job_latency.py [--jobs 20]
Uses CELERY_BROKER_URL (filesystem broker by default; e.g. redis://127.0.0.1:6379/14)
and DATABASE_URL (fresh SQLite by default). Each job imports the 25-class ontology excerpt.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

from _django import ROOT, setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()
    setup()

    from django.conf import settings
    from django.db import transaction

    from core.models import Job, WorkerHeartbeat
    from core.services import job_enqueue
    from earmark.celery import app

    app.control.purge()
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "earmark",
            "worker",
            "-Q",
            "default",
            "-P",
            "solo",
            "-n",
            "bench@%h",
            "--without-mingle",
            "--without-gossip",
            "-l",
            "WARNING",
        ],
        cwd=ROOT,
        env={**os.environ, "WORKER_HEARTBEAT_SECONDS": "1"},
    )
    try:
        deadline = time.monotonic() + 60
        while not WorkerHeartbeat.objects.exists():
            if time.monotonic() > deadline:
                raise SystemExit("worker did not start within 60 s")
            time.sleep(0.2)
        excerpt = str(ROOT / "curation" / "fixtures" / "audioset_ontology_excerpt.json")
        latencies, queue_waits = [], []
        for _ in range(args.jobs):
            sent = time.perf_counter()
            with transaction.atomic():
                job = job_enqueue(kind="ontology_import", params={"path": excerpt})
            while not Job.objects.filter(pk=job.pk, state=Job.State.SUCCEEDED).exists():
                time.sleep(0.01)
            latencies.append(time.perf_counter() - sent)
            job.refresh_from_db()
            assert job.started_at is not None
            queue_waits.append((job.started_at - job.created_at).total_seconds())
    finally:
        worker.terminate()
        worker.wait(30)
    broker = settings.CELERY_BROKER_URL.split("://")[0]
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(
        f"machine: {platform.machine()}, python {platform.python_version()}, "
        f"broker {broker}, database {db}, {args.jobs} sequential jobs"
    )
    print(
        f"enqueue→succeeded: median {statistics.median(latencies) * 1000:.0f} ms, "
        f"max {max(latencies) * 1000:.0f} ms"
    )
    print(f"created→started (queue wait): median {statistics.median(queue_waits) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
