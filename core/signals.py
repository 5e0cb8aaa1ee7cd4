"""Worker-side hooks.

Each Celery worker records itself in core.WorkerHeartbeat from a thread (not a Celery
timer), so a solo-pool GPU worker busy with a training job still shows as alive. At start it
ends the jobs an earlier process under its name left running, and it always serves the
sweeps queue, whatever its -Q says. Every periodic sweep it runs is recorded in
core.SweepRun for /healthz.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from celery.signals import celeryd_after_setup, task_postrun, worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from core import execution  # noqa: F401  (draws the instance id before a worker forks)

log = logging.getLogger(__name__)
_stop = threading.Event()


def _beat(hostname: str, queues: str) -> None:
    from core.models import WorkerHeartbeat
    from core.services import jobs_recover_restarted

    started = timezone.now()
    try:
        ended = jobs_recover_restarted(worker=hostname)
        if ended:
            log.warning("%s: ended %d job(s) its previous start left running", hostname, ended)
    except Exception:
        log.exception("recovering the jobs of %s's previous start failed", hostname)
    finally:
        connection.close()
    while not _stop.is_set():
        try:
            close_old_connections()
            WorkerHeartbeat.objects.update_or_create(
                hostname=hostname,
                defaults={
                    "queues": queues,
                    "pid": os.getpid(),
                    "last_seen": timezone.now(),
                    "started_at": started,
                    "stopped_at": None,
                },
            )
        except Exception:  # the database may be briefly away; keep beating
            log.exception("worker heartbeat failed")
        finally:
            connection.close()
        _stop.wait(settings.WORKER_HEARTBEAT_SECONDS)


@celeryd_after_setup.connect
def serve_sweeps(sender: Any = None, instance: Any = None, **_: Any) -> None:
    """Every worker consumes the sweeps queue, so sweeps run while any worker is up."""
    if instance is not None:
        instance.app.amqp.queues.select_add(settings.SWEEPS_QUEUE)


_beating: list[threading.Thread] = []


@worker_ready.connect
def start_heartbeat(sender: Any = None, **_: Any) -> None:
    hostname = sender.hostname
    queues = ",".join(sorted(q.name for q in sender.app.amqp.queues.consume_from.values()))
    thread = threading.Thread(target=_beat, args=(hostname, queues), daemon=True)
    thread.start()
    _beating.append(thread)


@worker_shutdown.connect
def stop_heartbeat(sender: Any = None, **_: Any) -> None:
    """Marks the row stopped (not deleted: pages say since when a queue has no worker),
    after the heartbeat thread's last write, which would otherwise undo the mark."""
    from core.models import WorkerHeartbeat

    _stop.set()
    for thread in _beating:
        thread.join(timeout=5)
    if sender is not None:
        WorkerHeartbeat.objects.filter(hostname=sender.hostname).update(stopped_at=timezone.now())


def sweep_tasks() -> dict[str, float]:
    """Task name → interval in seconds of each periodic sweep (CELERY_BEAT_SCHEDULE)."""
    return {
        entry["task"]: float(entry["schedule"]) for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }


@task_postrun.connect
def record_sweep(
    sender: Any = None, state: str | None = None, retval: Any = None, **_: Any
) -> None:
    name = getattr(sender, "name", None)
    if name not in sweep_tasks():
        return
    from core.models import SweepRun

    failed = state != "SUCCESS"
    try:
        SweepRun.objects.update_or_create(
            task=name,
            defaults={
                "last_run_at": timezone.now(),
                "last_ok": not failed,
                "last_error": str(retval)[:2000] if failed else "",
            },
        )
    except Exception:  # the sweep ran; not recording it must not fail the worker
        log.exception("recording sweep %s failed", name)
