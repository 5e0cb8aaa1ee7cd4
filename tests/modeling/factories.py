"""Rows and fixtures for modeling tests: runs and snapshots written directly for the page and
API tests, and the tiny SynthScenes corpus that training tests (test_runs*.py, the
reliability tests of training) really train on.

Test modules opt in to a fixture by importing it under its function's name, e.g.
``from tests.modeling.factories import scenes_fixture  # noqa: F401 (fixture)``; the test
then asks for it by the fixture's name (``scenes``). The two names differ so that a test's
argument does not shadow the import (ruff's F811)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from core.models import Project
from corpus.models import Snapshot
from corpus.services import snapshot_build, snapshot_create
from curation.models import Subset
from curation.services import ontology_import
from modeling import services
from modeling.models import TrainingRun
from modeling.planning import run_spec
from modeling.services_synth import synthscenes_make
from tests.conftest import FIXTURES

# What makes a run on the SynthScenes corpus take seconds on one CPU core (with the tiny
# preset); each test adds its epochs.
TINY_RUN = [
    "train.batch_size=4",
    "train.log_every_steps=1",
    "features.n_mels=16",
    "features.hop_length=3200",
]


def ready_snapshot(project: Project) -> Snapshot:
    return Snapshot.objects.create(
        project=project,
        version=1,
        format=Snapshot.Format.JSONL,
        splits=["train", "val", "test"],
        state=Snapshot.State.READY,
        archive="snapshots/sounds-v1.zip",
        archive_sha256="0" * 64,
        finished_at=timezone.now(),
        counts={"train": {"clips": 8, "captions": 16}},
    )


def make_run(project: Project, snapshot: Snapshot, **fields: Any) -> TrainingRun:
    defaults: dict[str, Any] = {
        "model_name": "tempatt",
        "config": run_spec(model_name="tempatt", preset="tiny"),
        "state": TrainingRun.State.SUCCEEDED,
        "checkpoint": "checkpoints/run.pt",
        "metrics": {
            "test": {"BLEU-4": 0.12, "CIDEr-D": 0.31, "SPICE": None, "SPIDEr": None},
            "val": {"BLEU-4": 0.1, "CIDEr-D": 0.2},
        },
        "learning_curve": [
            {"step": 1, "epoch": 0, "loss": 5.1, "lr": 0.001},
            {"step": 2, "epoch": 0, "loss": 4.2, "lr": 0.001},
            {"step": 2, "epoch": 0, "val_loss": 4.0, "score": 0.2},
        ],
    }
    defaults.update(fields)
    return TrainingRun.objects.create(project=project, snapshot=snapshot, **defaults)


# Really training ------------------------------------------------------------------------


@pytest.fixture(name="media_root")
def media_root_fixture(settings: Any, tmp_path: Path) -> Path:
    """Clips, checkpoints and cached features in the test's own folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.FEATURE_CACHE_DIR = tmp_path / "features"
    return settings.MEDIA_ROOT


@pytest.fixture(name="scenes")
def scenes_fixture(project: Project, media_root: Path) -> Subset:
    """Twelve SynthScenes clips with audio, video and captions (8 train, 2 val, 2 test)."""
    ontology_import(path=FIXTURES / "audioset_ontology.json")
    result = synthscenes_make(project=project, train=8, val=2, test=2, seed=7)
    return Subset.objects.get(project=project, slug=result["subset"])


def jsonl_snapshot(
    project: Project, *, splits: list[str], created_by: User | None = None
) -> Snapshot:
    """A built JSON-lines snapshot of the project's captions, as training reads them."""
    created = snapshot_create(
        project=project, fmt="jsonl", text="raw", splits=splits, created_by=created_by
    )
    return snapshot_build(snapshot=created)


@pytest.fixture(name="snapshot")
def snapshot_fixture(project: Project, scenes: Subset, alice: User) -> Snapshot:
    """The scenes' train, val and test captions, in a snapshot Alice made."""
    return jsonl_snapshot(project, splits=["train", "val", "test"], created_by=alice)


def start_tiny_run(
    project: Project, snapshot: Snapshot, model: str, overrides: list[str]
) -> TrainingRun:
    """A run of the model's tiny preset, recorded but not queued: the test executes it."""
    return services.run_start(
        project=project,
        model_name=model,
        snapshot=snapshot,
        created_by=None,
        preset="tiny",
        overrides=overrides,
        enqueue=False,
    )
