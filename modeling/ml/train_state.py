"""A training run's bookkeeping: its stages, the loop's resumable state and what it produced.

A run trains in up to five stages that share one epoch counter: the model's own
pre-training, first with its pretrained backbone frozen (``train.pretrain_frozen_epochs``)
then whole (``train.pretrain_epochs``), caption training (``train.epochs``), a whole-model
caption fine-tune (``train.finetune_epochs``) and the self-critical stage
(``train.scst_epochs``). ``TrainerState`` is everything the loop has
counted and decided, which the "last" checkpoint stores so a resumed run continues exactly.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from modeling.ml.config import TrainConfig

PRETRAIN_FROZEN, PRETRAIN, CAPTION, SCST = "pretrain_frozen", "pretrain", "caption", "scst"
FINETUNE = "finetune"
# the stages that train on the teacher-forced caption loss
CROSS_ENTROPY = (CAPTION, FINETUNE)
# the stages that train on the model's own pre-training loss
PRETRAINING = (PRETRAIN_FROZEN, PRETRAIN)


@dataclass(frozen=True)
class Stage:
    """A run of consecutive epochs trained the same way."""

    name: str  # PRETRAIN_FROZEN, PRETRAIN, CAPTION, FINETUNE or SCST
    first_epoch: int  # global epoch index of its first epoch
    epochs: int

    @property
    def end(self) -> int:
        return self.first_epoch + self.epochs

    @property
    def pretraining(self) -> bool:
        return self.name in PRETRAINING


def run_stages(config: TrainConfig) -> list[Stage]:
    """The run's stages in order, those with epochs: frozen-backbone pre-training,
    pre-training, captions, whole-model fine-tune, self-critical."""
    stages, first = [], 0
    for name, epochs in (
        (PRETRAIN_FROZEN, config.pretrain_frozen_epochs),
        (PRETRAIN, config.pretrain_epochs),
        (CAPTION, config.epochs),
        (FINETUNE, config.finetune_epochs),
        (SCST, config.scst_epochs),
    ):
        if epochs > 0:
            stages.append(Stage(name, first, epochs))
        first += epochs
    return stages


@dataclass
class TrainerState:
    """The loop's position and what it has decided so far. All of it goes into the "last"
    checkpoint (``trainer_state``: ``to_dict()`` plus the RNG states) so a resume is exact."""

    step: int = 0  # optimisation steps done, all stages
    epoch: int = 0  # global epochs completed (pre-training epochs first)
    batch_in_epoch: int = 0  # batches of the current epoch done (a resume skips them)
    epoch_loss_sum: float = 0.0  # the current epoch's training loss so far ...
    epoch_loss_count: int = 0  # ... over this many batches
    best_score: float | None = None  # best validation score (higher is better)
    bad_validations: int = 0  # validations since the best one (early stopping)
    plateau_bad: int = 0  # validations since the best one or the last plateau cut
    plateau_scale: float = 1.0  # learning-rate factor from plateau cuts
    stage_step: int = 0  # optimisation steps since the current stage began (warm-up)
    history: list[dict[str, Any]] = field(default_factory=list)  # TrainResult.history rows
    plateau_best: float | None = None  # best plateau_metric value (when it is not the score)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def saved(self) -> dict[str, Any]:
        """What a checkpoint stores as ``trainer_state``: ``to_dict()`` plus the random
        number generators' states (torch's, Python's, and CUDA's where present)."""
        saved = dict(
            self.to_dict(), rng=torch.get_rng_state(), python_rng=list(random.getstate()[1])
        )
        if torch.cuda.is_available():
            saved["cuda_rng"] = torch.cuda.get_rng_state_all()
        return saved

    @classmethod
    def restore(cls, saved: Mapping[str, Any]) -> TrainerState:
        """The state of a checkpoint's ``trainer_state``; sets the generators it holds."""
        if "rng" in saved:
            torch.set_rng_state(saved["rng"].cpu())
        if "python_rng" in saved:
            random.setstate((3, tuple(saved["python_rng"]), None))
        if "cuda_rng" in saved and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in saved["cuda_rng"]])
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in saved.items() if key in names})

    def enter_stage(self) -> None:
        """A stage has its own warm-up, patience and plateau."""
        self.stage_step = self.bad_validations = self.plateau_bad = 0
        self.plateau_scale = 1.0
        self.plateau_best = None

    def end_epoch(self) -> float:
        """Moves on to the next epoch; returns the finished epoch's mean training loss."""
        loss = self.epoch_loss_sum / max(1, self.epoch_loss_count)
        self.epoch += 1
        self.batch_in_epoch = self.epoch_loss_count = 0
        self.epoch_loss_sum = 0.0
        return loss


@dataclass
class TrainResult:
    """What a run produced."""

    # One row per completed epoch: epoch, stage, step, train_loss, val_loss, score, lr, seconds.
    history: list[dict[str, Any]]
    best_checkpoint: Path | None  # None when nothing was ever validated
    last_checkpoint: Path
    best_score: float | None
    stopped: str  # "completed", "early_stopping" or "cancelled"
    steps: int
