"""Rows for modeling page and API tests, written directly (training is tested in
test_runs.py)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from core.models import Project
from corpus.models import Snapshot
from modeling.models import TrainingRun
from modeling.services import run_spec


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
