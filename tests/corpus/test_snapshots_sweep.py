"""Interrupted exports (issue 23 item 7): a snapshot follows its job, and the snapshots
sweep fails snapshots left building and removes the temporary archives, unreferenced
archives and work folders interrupted builds leave behind."""

from __future__ import annotations

import io
import os
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from core.models import Job, Project
from core.services import job_cancel, job_create, jobs_fail_lost
from corpus import tasks
from corpus.models import CorpusImport, Snapshot
from corpus.services import snapshot_build, snapshot_create, snapshot_start, snapshots_sweep
from corpus.services.snapshots import PARTIAL_DIR

HOUR = 3600


def _snapshot(project: Project, **kw: Any) -> Snapshot:
    return snapshot_create(project=project, fmt="jsonl", text="raw", splits=["train"], **kw)


def _aged(path: Path, seconds: float) -> Path:
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def _leftover(media: Path, name: str, *, age: float) -> Path:
    path = media / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK\x03\x04 half an archive")
    return _aged(path, age)


@pytest.fixture
def work_folders() -> Iterator[list[Path]]:
    """Work folders a test makes in the temp directory (removed after it either way)."""
    made: list[Path] = []
    yield made
    for folder in made:
        if folder.exists():
            for child in folder.iterdir():
                child.unlink()
            folder.rmdir()


def _work_folder(made: list[Path], snapshot_id: int, *, age: float) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"earmark-snapshot-{snapshot_id}-pid4242-"))
    (folder / "train.jsonl").write_text("{}\n")
    made.append(folder)
    return _aged(folder, age)


# A snapshot follows its job ---------------------------------------------------------------


@pytest.mark.django_db
def test_a_snapshot_whose_job_was_lost_fails_with_the_jobs_reason(
    imported: CorpusImport,
) -> None:
    snapshot = _snapshot(imported.project)
    job = job_create(kind="snapshot_build", params={"snapshot_id": snapshot.pk})
    Snapshot.objects.filter(pk=snapshot.pk).update(job=job)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING,
        worker="cpu@gone",
        execution="x",
        runner_pid=4242,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )

    assert jobs_fail_lost() == 1

    snapshot.refresh_from_db()
    assert snapshot.state == Snapshot.State.FAILED
    assert snapshot.error == (
        "Worker cpu@gone (pid 4242) stopped renewing its lease while running this job."
    )
    assert snapshot.finished_at is not None


@pytest.mark.django_db
def test_cancelling_a_queued_export_fails_its_snapshot(imported: CorpusImport) -> None:
    snapshot = snapshot_start(project=imported.project, fmt="jsonl", text="raw", splits=["train"])
    assert snapshot.job is not None

    job_cancel(job=snapshot.job)

    snapshot.refresh_from_db()
    assert (snapshot.state, snapshot.error) == ("failed", "Its export job was cancelled.")


# The sweep: snapshots left building -------------------------------------------------------


@pytest.mark.django_db
def test_the_sweep_fails_a_building_snapshot_whose_job_already_ended(
    imported: CorpusImport,
) -> None:
    snapshot = _snapshot(imported.project)
    job = job_create(kind="snapshot_build", params={"snapshot_id": snapshot.pk})
    # ended without its snapshot hearing of it (before snapshots followed their jobs)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.FAILED, error="MemoryError", finished_at=timezone.now()
    )
    Snapshot.objects.filter(pk=snapshot.pk).update(job=job)
    running = _snapshot(imported.project)
    running.job = job_create(kind="snapshot_build", params={"snapshot_id": running.pk})
    running.save()

    done = snapshots_sweep()

    assert done["failed"] == 1
    snapshot.refresh_from_db()
    running.refresh_from_db()
    assert (snapshot.state, snapshot.error) == ("failed", "MemoryError")
    assert running.state == Snapshot.State.BUILDING


@pytest.mark.django_db
def test_the_sweep_fails_an_old_snapshot_whose_build_never_started(
    imported: CorpusImport,
) -> None:
    old = _snapshot(imported.project)
    Snapshot.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=2))
    young = _snapshot(imported.project)

    assert snapshots_sweep()["failed"] == 1

    old.refresh_from_db()
    young.refresh_from_db()
    assert old.state == Snapshot.State.FAILED
    assert old.error == "Its export never started (the process building it stopped first)."
    assert young.state == Snapshot.State.BUILDING


# The sweep: leftovers in storage and in the temp directory ----------------------------------


@pytest.mark.django_db
def test_the_sweep_removes_old_temporary_archives_of_snapshots_no_longer_building(
    imported: CorpusImport, media: Path
) -> None:
    failed = _snapshot(imported.project)
    Snapshot.objects.filter(pk=failed.pk).update(state=Snapshot.State.FAILED)
    building = _snapshot(imported.project)
    orphan = _leftover(media, f"{PARTIAL_DIR}/{failed.pk}-aaaa.zip", age=2 * HOUR)
    recent = _leftover(media, f"{PARTIAL_DIR}/{failed.pk}-bbbb.zip", age=60)
    in_progress = _leftover(media, f"{PARTIAL_DIR}/{building.pk}-cccc.zip", age=2 * HOUR)
    deleted = _leftover(media, f"{PARTIAL_DIR}/9999-dddd.zip", age=2 * HOUR)  # no such snapshot

    done = snapshots_sweep()

    assert done["partial_archives"] == 2
    assert (orphan.exists(), deleted.exists()) == (False, False)
    assert (recent.exists(), in_progress.exists()) == (True, True)


@pytest.mark.django_db
def test_the_sweep_removes_old_archives_no_snapshot_names(
    imported: CorpusImport, media: Path
) -> None:
    ready = snapshot_build(snapshot=_snapshot(imported.project))
    kept = media / ready.archive.name
    _aged(kept, 2 * HOUR)
    orphan = _leftover(media, "snapshots/sounds-v7-jsonl-raw.zip", age=2 * HOUR)
    recent = _leftover(media, "snapshots/sounds-v8-jsonl-raw.zip", age=60)

    done = snapshots_sweep()

    assert done["orphan_archives"] == 1
    assert not orphan.exists()
    assert kept.exists()
    assert recent.exists()


@pytest.mark.django_db
def test_the_sweep_removes_stale_work_folders_of_snapshots_no_longer_building(
    imported: CorpusImport, work_folders: list[Path]
) -> None:
    failed = _snapshot(imported.project)
    Snapshot.objects.filter(pk=failed.pk).update(state=Snapshot.State.FAILED)
    building = _snapshot(imported.project)
    stale = _work_folder(work_folders, failed.pk, age=2 * HOUR)
    fresh = _work_folder(work_folders, failed.pk, age=60)
    busy = _work_folder(work_folders, building.pk, age=2 * HOUR)

    done = snapshots_sweep()

    assert done["work_folders"] == 1
    assert not stale.exists()
    assert fresh.exists()
    assert busy.exists()


@pytest.mark.django_db
def test_the_age_threshold_comes_from_the_setting_or_the_caller(
    imported: CorpusImport, media: Path, settings: Any
) -> None:
    failed = _snapshot(imported.project)
    Snapshot.objects.filter(pk=failed.pk).update(state=Snapshot.State.FAILED)
    leftover = _leftover(media, f"{PARTIAL_DIR}/{failed.pk}-aaaa.zip", age=120)
    settings.SNAPSHOT_ORPHAN_SECONDS = 300

    assert snapshots_sweep()["partial_archives"] == 0
    assert snapshots_sweep(older_than=60)["partial_archives"] == 1
    assert not leftover.exists()


# Where it runs -----------------------------------------------------------------------------


def test_the_sweep_runs_every_ten_minutes_on_the_sweeps_queue() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["snapshots-sweep"]

    assert (entry["task"], entry["schedule"]) == ("corpus.tasks.snapshots_sweep", 600.0)
    assert entry["options"]["queue"] == settings.SWEEPS_QUEUE


@pytest.mark.django_db
def test_the_task_and_the_command_run_the_same_sweep(imported: CorpusImport, media: Path) -> None:
    failed = _snapshot(imported.project)
    Snapshot.objects.filter(pk=failed.pk).update(state=Snapshot.State.FAILED)
    _leftover(media, f"{PARTIAL_DIR}/{failed.pk}-aaaa.zip", age=2 * HOUR)
    _leftover(media, f"{PARTIAL_DIR}/{failed.pk}-bbbb.zip", age=120)

    assert tasks.snapshots_sweep()["partial_archives"] == 1
    out = io.StringIO()
    call_command("sweep_snapshots", "--older-than", "60", stdout=out)
    assert out.getvalue().strip() == (
        "0 building snapshot(s) failed, 1 temporary archive(s), 0 unreferenced archive(s) "
        "and 0 work folder(s) removed."
    )
    assert list((media / PARTIAL_DIR).iterdir()) == []
