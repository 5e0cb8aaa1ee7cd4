"""The snapshots sweep: what an interrupted export leaves behind.

A build killed (kill -9, OOM, a lost machine) before it commits leaves its snapshot
`building`, its archive under a temporary key in `snapshots/partial/`, and its work folder
in the temp directory; one killed in the instant between moving the archive to its final
key and committing leaves an archive no snapshot names. This sweep (beat's
`snapshots-sweep`, or `manage.py sweep_snapshots`) fails such snapshots, naming why, and
removes the leftovers once they are older than SNAPSHOT_ORPHAN_SECONDS and no build can
still be writing them: a temporary key or work folder only when its snapshot is no longer
building.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.files.storage import Storage
from django.utils import timezone

from core.models import Job
from corpus.models import Snapshot
from corpus.services.snapshots import PARTIAL_DIR
from corpus.signals import fail_building

_WORK_PREFIX = "earmark-snapshot-"


def _older_than(storage: Storage, name: str, cutoff: datetime) -> bool:
    try:
        return storage.get_modified_time(name) < cutoff
    except (FileNotFoundError, NotImplementedError):
        return False


def _files(storage: Storage, folder: str) -> list[str]:
    try:
        _, files = storage.listdir(folder)
    except FileNotFoundError:
        return []
    return [f"{folder}/{name}" for name in files]


def _snapshot_id(name: str, prefix: str) -> int | None:
    """The snapshot a leftover belongs to: `<prefix><id>-…`."""
    head = name.removeprefix(prefix).split("-", 1)[0]
    return int(head) if name.startswith(prefix) and head.isdigit() else None


def snapshots_sweep(
    *, now: datetime | None = None, older_than: float | None = None
) -> dict[str, int]:
    """Fails building snapshots whose job ended (or that never got one), and removes
    leftovers of interrupted builds older than `older_than` seconds (default
    SNAPSHOT_ORPHAN_SECONDS). Returns what it did, by kind."""
    now = now or timezone.now()
    age = settings.SNAPSHOT_ORPHAN_SECONDS if older_than is None else older_than
    cutoff = now - timedelta(seconds=age)
    done = {"failed": 0, "partial_archives": 0, "orphan_archives": 0, "work_folders": 0}

    building = Snapshot.objects.filter(state=Snapshot.State.BUILDING)
    for job in Job.objects.filter(
        pk__in=building.values("job"), state__in=Job.FINISHED_STATES
    ).order_by("pk"):
        done["failed"] += fail_building(building.filter(job=job), job)
    # a build started by a command that died before its job row was linked
    done["failed"] += building.filter(job__isnull=True, created_at__lt=cutoff).update(
        state=Snapshot.State.FAILED,
        error="Its export never started (the process building it stopped first).",
        finished_at=now,
    )

    still_building = set(
        Snapshot.objects.filter(state=Snapshot.State.BUILDING).values_list("pk", flat=True)
    )
    storage = Snapshot.archive.field.storage
    for name in _files(storage, PARTIAL_DIR):
        owner = _snapshot_id(name.rsplit("/", 1)[-1], "")
        if owner not in still_building and _older_than(storage, name, cutoff):
            storage.delete(name)
            done["partial_archives"] += 1
    folder = PARTIAL_DIR.rsplit("/", 1)[0]
    named = set(Snapshot.objects.exclude(archive="").values_list("archive", flat=True))
    for name in _files(storage, folder):
        if name not in named and name.endswith(".zip") and _older_than(storage, name, cutoff):
            storage.delete(name)
            done["orphan_archives"] += 1

    oldest = time.time() - age
    for path in Path(tempfile.gettempdir()).glob(f"{_WORK_PREFIX}*"):
        owner = _snapshot_id(path.name, _WORK_PREFIX)
        try:
            stale = path.is_dir() and path.stat().st_mtime < oldest
        except FileNotFoundError:  # removed meanwhile
            continue
        if stale and owner not in still_building:
            shutil.rmtree(path, ignore_errors=True)
            done["work_folders"] += 1
    return done
