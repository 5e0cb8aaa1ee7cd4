"""Job kinds the reliability tests inject faults into, and the handlers behind them.

`register(queue)` adds them to core.jobs.JOB_KINDS: the tests do it in their own process
(with a queue of their own, so a worker started for one test module takes no other's
messages) and `tests.reliability.launch` in the worker and command processes they start.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections

from core.jobs import JOB_KINDS, JobKind
from core.models import Job
from core.services import Progress

KINDS = {
    # reports progress every 0.1 s for `seconds`; safe to run again
    "rel_sleep_rerun": ("sleep", True),
    # the same, not safe to run again: a lost runner fails it
    "rel_sleep_once": ("sleep", False),
    # terminates its own database connection, then fails on it, reports progress or returns
    "rel_break_db": ("break_db", False),
    # the same, safe to run again: a lost connection queues it again
    "rel_break_db_rerun": ("break_db", True),
    # builds a snapshot and stops between writing its archive and committing it
    "rel_snapshot_stall": ("snapshot_stall_before_commit", False),
}


def sleep(*, job: Job, progress: Progress, seconds: float) -> dict[str, Any]:
    end = time.monotonic() + seconds
    steps = max(1, round(seconds * 10))
    for step in range(1, steps + 1):
        progress(step - 1, steps, "sleeping")
        time.sleep(max(0.0, min(0.1, end - time.monotonic())))
    progress(steps, steps, "woke up")
    return {"slept": seconds}


# SQLite has no server connection to terminate: closing its file handle under Django (what
# terminate_own_connection does there) raises ProgrammingError, not the OperationalError a
# dropped connection raises, so what rides out a dropped connection is tested on PostgreSQL.
postgresql_only = pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
    reason="needs PostgreSQL: SQLite has no server connection to terminate (pg_terminate_backend)",
)


def terminate_own_connection() -> None:
    """Cuts this thread's database connection the way an outage does: on PostgreSQL another
    session terminates its backend (pg_terminate_backend); SQLite has no server, so the
    driver's connection is closed under Django, which still believes it open."""
    connection.ensure_connection()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        killer = connections.create_connection("default")
        try:
            with killer.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(%s)", [backend])
        finally:
            killer.close()
    else:
        raw = connection.connection
        assert raw is not None
        raw.close()


def break_db(*, job: Job, progress: Progress, then: str) -> dict[str, Any]:
    progress(1, 3, "about to lose the database")
    terminate_own_connection()
    if then == "fail":
        # the handler's next query meets the dead connection, as a job's work would
        Job.objects.filter(pk=job.pk).count()
        raise AssertionError("the query on a terminated connection should have failed")
    if then == "report":
        progress(3, 3, "reported after the outage")  # final: written however soon
    return {"then": then}


def snapshot_stall_before_commit(
    *, job: Job, progress: Progress, snapshot_id: int, marker: str
) -> dict[str, Any]:
    """snapshot_build_job, except that once the archive is written (under its temporary
    key) it touches `marker` and waits instead of committing: the moment a test kills it."""
    from corpus.services import snapshots

    def stall(*args: Any, **kwargs: Any) -> None:
        Path(marker).touch()
        while True:
            time.sleep(1)

    snapshots._snapshot_commit = stall  # type: ignore[assignment]  # this process only
    return snapshots.snapshot_build_job(job=job, progress=progress, snapshot_id=snapshot_id)


def specs(queue: str) -> dict[str, JobKind]:
    return {
        kind: JobKind(f"Test {kind}", f"{__name__}.{handler}", queue, rerun_safe)
        for kind, (handler, rerun_safe) in KINDS.items()
    }


def register(queue: str) -> None:
    JOB_KINDS.update(specs(queue))
