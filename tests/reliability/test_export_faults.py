"""Failure 7: interrupted exports. A build killed between writing its archive and
committing the snapshot leaves its archive under a temporary key only (never a corrupt zip
under a real name); its job's lease runs out, the lease sweep fails the job and the
snapshot follows it, and the snapshots sweep removes the temporary key and the work folder
the dead process could not clean up."""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.models import Job, Project
from core.services import job_create, jobs_fail_lost
from corpus.models import Snapshot
from corpus.services import snapshot_create, snapshots_sweep
from corpus.services.snapshots import PARTIAL_DIR
from tests.corpus.conftest import clip_with_audio, crowd_caption
from tests.reliability import processes
from tests.reliability.processes import LEASE_SECONDS, final, wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def kinds(test_kinds: Callable[[str], None]) -> None:
    test_kinds("default")


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def test_a_build_killed_before_its_commit_leaves_nothing_behind_once_swept(
    project: Project, ann: Any, media: Path, tmp_path: Path
) -> None:
    clip, _ = clip_with_audio(seconds=0.5, seed=1, youtube_id="ZZZZZZZZZZZ", start=0)
    crowd_caption(project, ann, "a dog barks twice", split="train", clip=clip)
    snapshot = snapshot_create(
        project=project, fmt="jsonl", text="raw", splits=["train"], with_audio=True
    )
    marker = tmp_path / "archive-written"
    job = job_create(
        kind="rel_snapshot_stall",
        params={"snapshot_id": snapshot.pk, "marker": str(marker)},
        project=project,
    )
    env = {**processes.environment(), "MEDIA_ROOT": str(media)}
    command = processes.start(["manage", "run_job", str(job.pk)], env=env)
    try:
        wait_until(marker.exists, what="the archive written", process=command)
        command.signal(signal.SIGKILL)  # between the archive's write and the commit
        command.process.wait(timeout=30)
    finally:
        command.stop()

    partial = list((media / PARTIAL_DIR).iterdir())
    assert [p.name.split("-", 1)[0] for p in partial] == [str(snapshot.pk)]
    assert not list((media / "snapshots").glob("*.zip"))  # nothing under a real name
    work = list(
        Path(tempfile.gettempdir()).glob(
            f"earmark-snapshot-{snapshot.pk}-pid{command.process.pid}-*"
        )
    )
    assert work  # the killed process could not remove its work folder
    snapshot.refresh_from_db()
    assert snapshot.state == Snapshot.State.BUILDING

    time.sleep(LEASE_SECONDS + 0.5)
    assert jobs_fail_lost() == 1
    job = final(job)
    snapshot.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert (snapshot.state, snapshot.error) == (Snapshot.State.FAILED, job.error)

    done = snapshots_sweep(older_than=0)

    assert (done["partial_archives"], done["work_folders"]) == (1, 1)
    assert not any(p.exists() for p in partial + work)
    assert not list((media / "snapshots").rglob("*.zip"))
