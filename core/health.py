"""Availability checks behind /healthz. Core checks decide the status code; apps register
checks of their own services in CHECKS.

The database, broker and workers are checked on every call. External tools are probed
through `cached_probe`: `java -version` starts a JVM and a LanguageTool server is a remote
request, so a load balancer polling every few seconds would start one each time; their
results are kept for HEALTHZ_PROBE_SECONDS instead."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.utils import timezone


@dataclass
class Check:
    ok: bool
    detail: str
    core: bool = False


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return Check(True, f"{connection.vendor} reachable", core=True)
    except Exception as exc:
        return Check(False, f"{connection.vendor}: {exc}", core=True)


def check_broker() -> Check:
    # the project's Celery app (earmark/__init__.py creates it as the current app) without
    # core importing the project package that sits above it
    from celery import current_app as app

    url = settings.CELERY_BROKER_URL
    scheme = url.split("://", 1)[0]
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return Check(True, f"{scheme} broker reachable", core=True)
    except Exception as exc:
        return Check(False, f"{scheme} broker unreachable: {exc}", core=True)


@dataclass(frozen=True)
class UnservedQueue:
    queue: str
    # when a worker last served it (stopped, or its last heartbeat before it died); None
    # when no worker on record ever did
    since: datetime | None

    def describe(self) -> str:
        if self.since is None:
            return f"{self.queue} (no worker has served it)"
        return f"{self.queue} (since {timezone.localtime(self.since):%H:%M})"


def unserved_queues(queues: Iterable[str], *, now: datetime | None = None) -> list[UnservedQueue]:
    """Those of `queues` no live worker consumes, each with since when, in the given order.
    Read from the heartbeat rows, which outlive their workers for this."""
    from core.models import WorkerHeartbeat

    now = now or timezone.now()
    alive = set(WorkerHeartbeat.alive(now).values_list("pk", flat=True))
    served: set[str] = set()
    last: dict[str, datetime] = {}
    for beat in WorkerHeartbeat.objects.all():
        names = [q for q in beat.queues.split(",") if q]
        if beat.pk in alive:
            served.update(names)
            continue
        gone = beat.gone_since()
        for name in names:
            last[name] = max(last.get(name, gone), gone)
    return [UnservedQueue(q, last.get(q)) for q in dict.fromkeys(queues) if q not in served]


def check_workers() -> Check:
    """Down unless every queue of HEALTHZ_REQUIRED_QUEUES has a live consumer: a queue
    nobody serves holds its jobs queued forever, however healthy the other workers are."""
    from core.models import WorkerHeartbeat

    try:
        alive = list(WorkerHeartbeat.alive())
        missing = unserved_queues(settings.HEALTHZ_REQUIRED_QUEUES)
    except Exception as exc:
        return Check(False, f"cannot read heartbeats: {exc}", core=True)
    if not alive:
        return Check(False, "no Celery worker has sent a heartbeat recently", core=True)
    queues = sorted({q for w in alive for q in w.queues.split(",") if q})
    detail = f"{len(alive)} worker(s) alive; queues served: {', '.join(queues)}"
    if missing:
        detail += "; no worker for: " + ", ".join(m.describe() for m in missing)
    return Check(not missing, detail, core=True)


def check_sweeps() -> Check:
    """Each periodic sweep ran within twice its interval. One that never ran counts as late
    once a worker has been up that long (beat or every worker's sweeps queue is missing)."""
    from core.models import SweepRun, WorkerHeartbeat
    from core.signals import sweep_tasks

    now = timezone.now()
    try:
        last = dict(SweepRun.objects.values_list("task", "last_run_at"))
        oldest_worker = (
            WorkerHeartbeat.alive(now).order_by("started_at").values_list("started_at", flat=True)
        ).first()
    except Exception as exc:
        return Check(False, f"cannot read sweep runs: {exc}", core=True)
    late = []
    for task, interval in sorted(sweep_tasks().items()):
        allowed = timedelta(seconds=2 * interval)
        ran = last.get(task)
        if ran is None:
            if oldest_worker is not None and now - oldest_worker > allowed:
                late.append(f"{task} never ran (every {interval:g} s)")
        elif now - ran > allowed:
            minutes = (now - ran).total_seconds() / 60
            late.append(f"{task} last ran {minutes:.0f} min ago (every {interval:g} s)")
    if late:
        return Check(False, "late: " + "; ".join(late), core=True)
    return Check(True, f"{len(sweep_tasks())} sweep(s) on time", core=True)


def _version_line(command: list[str]) -> Check:
    if shutil.which(command[0]) is None:
        return Check(False, f"{command[0]} not found on PATH")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(False, f"{command[0]} failed to run: {exc}")
    first = (done.stdout or done.stderr).strip().splitlines()
    return Check(done.returncode == 0, first[0] if first else f"exit {done.returncode}")


def check_ffmpeg() -> Check:
    return _version_line([settings.FFMPEG_BINARY, "-version"])


def check_java() -> Check:
    return _version_line([settings.JAVA_BINARY, "-version"])


def cached_probe(name: str, check: Callable[[], Check]) -> Callable[[], Check]:
    """`check`, its result kept in the cache for HEALTHZ_PROBE_SECONDS (per process with
    locmem://): for probes that start a program or call another server."""

    def probe() -> Check:
        key = f"healthz-probe-{name}"
        found = cache.get(key)
        if isinstance(found, Check):
            return found
        result = check()
        cache.set(key, result, settings.HEALTHZ_PROBE_SECONDS)
        return result

    return probe


CHECKS: dict[str, Callable[[], Check]] = {
    "database": check_database,
    "broker": check_broker,
    "workers": check_workers,
    "sweeps": check_sweeps,
    "ffmpeg": cached_probe("ffmpeg", check_ffmpeg),
    "java": cached_probe("java", check_java),
}
"""The checks /healthz runs, in order. Apps above core add their own in AppConfig.ready()
(post-processing adds "languagetool"), so core never imports them."""


def run_checks(*, details: bool) -> tuple[bool, dict[str, dict[str, object]]]:
    """Whether the core checks pass, and each check's result. Without `details` a result
    is only whether it passed: the lines name versions, hosts, paths and errors, which tell
    an attacker what to try, so only staff and monitoring (HEALTHZ_TOKEN) read them."""
    results = {name: check() for name, check in CHECKS.items()}
    core_ok = all(r.ok for r in results.values() if r.core)
    if not details:
        return core_ok, {name: {"ok": r.ok, "core": r.core} for name, r in results.items()}
    return core_ok, {name: asdict(r) for name, r in results.items()}
