"""Worker heartbeat: each Celery worker records itself in core.WorkerHeartbeat.

A thread (not a Celery timer) writes it, so a solo-pool GPU worker busy with a
training job still shows as alive.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

log = logging.getLogger(__name__)
_stop = threading.Event()


def _beat(hostname: str, queues: str) -> None:
    from core.models import WorkerHeartbeat

    started = timezone.now()
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
                },
            )
        except Exception:  # the database may be briefly away; keep beating
            log.exception("worker heartbeat failed")
        finally:
            connection.close()
        _stop.wait(settings.WORKER_HEARTBEAT_SECONDS)


@worker_ready.connect
def start_heartbeat(sender: Any = None, **_: Any) -> None:
    hostname = sender.hostname
    queues = ",".join(sorted(q.name for q in sender.app.amqp.queues.consume_from.values()))
    threading.Thread(target=_beat, args=(hostname, queues), daemon=True).start()


@worker_shutdown.connect
def stop_heartbeat(sender: Any = None, **_: Any) -> None:
    from core.models import WorkerHeartbeat

    _stop.set()
    if sender is not None:
        WorkerHeartbeat.objects.filter(hostname=sender.hostname).delete()
