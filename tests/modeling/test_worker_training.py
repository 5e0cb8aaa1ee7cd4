"""The integration of the modeling issue: a tiny captioner trains on SynthScenes clips
through the real Celery task on the gpu queue (a solo-pool worker process, CPU here), the
run finishes with metrics and a checkpoint, and its model then captions new clips."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.utils.nodenames import host_format
from django.conf import settings
from django.db import connection

from core.models import Job, Project, WorkerHeartbeat
from core.services import job_enqueue
from corpus.services import snapshot_build, snapshot_create
from curation.models import Subset
from curation.services import ontology_import
from modeling import services
from modeling.models import Suggestion, TrainingRun
from modeling.services_synth import synthscenes_make
from tests.conftest import FIXTURES, worker_database_url
from tests.core.test_worker import Worker, _purge_queues

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TRAIN_TIMEOUT_S = 600.0


@pytest.fixture(scope="module")
def storage_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gpu-worker")
    return {"MEDIA_ROOT": root / "media", "FEATURE_CACHE_DIR": root / "features"}


@pytest.fixture(scope="module")
def gpu_worker(
    django_db_setup: None, django_db_blocker: Any, storage_dirs: dict[str, Path]
) -> Iterator[Worker]:
    name = f"gpu-test-{uuid.uuid4().hex[:12]}@%h"
    with django_db_blocker.unblock():
        database_url = worker_database_url()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "earmark.settings_test",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "WORKER_HEARTBEAT_SECONDS": "1",
        "PYTHONUNBUFFERED": "1",
        # tiny models on 2 shared cores: one thread is ~30x faster than oversubscribing them
        "OMP_NUM_THREADS": "1",
        **{key: str(path) for key, path in storage_dirs.items()},
    }
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    _purge_queues()
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by Worker.stop)
    command = [sys.executable, "-m", "celery", "-A", "earmark", "worker", "-Q", "gpu"]
    command += ["-P", "solo", "-n", name, "--without-mingle", "--without-gossip", "-l", "INFO"]
    process = subprocess.Popen(
        command, cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    running = Worker(hostname=host_format(name), process=process, log=log)
    try:
        yield running
    finally:
        running.stop()
        with django_db_blocker.unblock():
            WorkerHeartbeat.objects.filter(hostname=running.hostname).delete()
            connection.close()


@pytest.fixture
def shared_storage(settings: Any, storage_dirs: dict[str, Path]) -> None:
    for key, path in storage_dirs.items():
        setattr(settings, key, path)


def test_a_tiny_model_trains_on_the_gpu_queue_then_captions_new_clips(
    gpu_worker: Worker, shared_storage: None, project: Project, alice: Any
) -> None:
    ontology_import(path=FIXTURES / "audioset_ontology.json")
    made = synthscenes_make(project=project, train=8, val=2, test=2, seed=11)
    snapshot = snapshot_build(
        snapshot=snapshot_create(
            project=project, fmt="jsonl", text="raw", splits=["train", "val", "test"]
        )
    )
    run = services.run_start(
        project=project,
        model_name="tempatt",
        snapshot=snapshot,
        created_by=alice,
        preset="tiny",
        overrides=[
            "train.epochs=2",
            "train.batch_size=4",
            "features.n_mels=16",
            "features.hop_length=3200",
        ],
    )
    assert run.job is not None

    job = gpu_worker.wait_for(run.job, timeout=TRAIN_TIMEOUT_S)

    run.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED, f"{job.error}\n{gpu_worker.output()}"
    assert job.queue == "gpu"
    assert job.worker == gpu_worker.hostname
    assert run.state == TrainingRun.State.SUCCEEDED, run.error
    assert run.checkpoint
    assert Path(run.checkpoint.path).is_file()
    assert isinstance(run.metrics["test"]["CIDEr-D"], float)
    assert run.history
    assert run.learning_curve

    # new clips: a second SynthScenes set the model has never heard
    fresh = synthscenes_make(project=project, train=0, val=0, test=3, seed=12)
    subset = Subset.objects.get(project=project, slug=fresh["subset"])
    captioning = job_enqueue(
        kind="clips_caption",
        params={"run_id": run.pk, "subset_id": subset.pk, "beam_size": 3},
        project=project,
    )
    captioning = gpu_worker.wait_for(captioning, timeout=TRAIN_TIMEOUT_S)

    assert captioning.state == Job.State.SUCCEEDED, f"{captioning.error}\n{gpu_worker.output()}"
    suggestions = Suggestion.objects.filter(run=run, clip__subsets=subset)
    assert suggestions.count() == 3
    assert all(s.text and s.log_prob <= 0 for s in suggestions)
    assert made["subset"] != fresh["subset"]
