"""A training run's live record: trainer callbacks that keep the run row and the job's
progress current while it trains (learning curve, history, best score, steps)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from core.progress import ProgressFn
from core.reconnect import with_reconnect
from modeling.models import TrainingRun

if TYPE_CHECKING:
    from modeling.ml.trainer import Callback, Trainer

CURVE_LIMIT = 5000  # learning-curve rows kept in the row (oldest steps thinned out)


class RunRecorder:
    """Trainer callbacks that keep the run row and the job's progress current."""

    def __init__(self, run: TrainingRun, progress: ProgressFn, flush_seconds: float = 2.0) -> None:
        self.run = run
        self.progress = progress
        self.flush_seconds = flush_seconds
        self.last_flush = 0.0
        self.total = 1

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last_flush >= self.flush_seconds:
            curve = self.run.learning_curve
            if len(curve) > CURVE_LIMIT:  # keep every validation, thin the steps
                steps = [r for r in curve if "loss" in r]
                keep = {id(r) for r in steps[::2]}
                self.run.learning_curve = [r for r in curve if "loss" not in r or id(r) in keep]
            # a dropped connection mid-epoch is retried on a fresh one (core.reconnect)
            with_reconnect(
                lambda: TrainingRun.objects.filter(pk=self.run.pk).update(
                    learning_curve=self.run.learning_curve,
                    history=self.run.history,
                    best_score=self.run.best_score,
                    steps=self.run.steps,
                ),
                what=f"recording run #{self.run.pk}'s progress",
            )
            self.last_flush = now

    def on_start(self, _trainer: Trainer, info: dict[str, Any]) -> None:
        self.total = max(1, int(info["total_steps"]))
        resumed = int(info.get("resumed_from_step") or 0)
        if resumed:
            # resumed from a stored checkpoint: what was recorded after it (the run crashed
            # before storing the next one) is trained again, so it goes
            self.run.learning_curve = [
                row for row in self.run.learning_curve if int(row.get("step") or 0) <= resumed
            ]
            self.run.history = [
                row for row in self.run.history if int(row.get("step") or 0) <= resumed
            ]
            self.run.steps = resumed
            self.flush(force=True)
        self.progress(resumed, self.total, "training")

    def on_step(self, _trainer: Trainer, info: dict[str, Any]) -> None:
        row = {k: info[k] for k in ("step", "epoch", "loss", "lr")}
        if info.get("stage", "caption") != "caption":
            row["stage"] = info["stage"]
        # the model's own per-step figures (MBP weights, SCST rewards)
        row.update({k: v for k, v in (info.get("figures") or {}).items() if k not in row})
        self.run.learning_curve.append(row)
        self.run.steps = int(info["step"])
        self.progress(
            int(info["step"]), self.total, f"epoch {info['epoch'] + 1}, loss {info['loss']:.3f}"
        )
        self.flush()

    def on_validation(self, _trainer: Trainer, info: dict[str, Any]) -> None:
        row = {k: info.get(k) for k in ("step", "epoch", "val_loss", "score")}
        self.run.learning_curve.append(row)
        if info.get("improved"):
            self.run.best_score = info.get("score")
        self.flush(force=True)

    def on_epoch_end(self, _trainer: Trainer, info: dict[str, Any]) -> None:
        self.run.history.append(dict(info))
        self.flush(force=True)

    def callbacks(self) -> dict[str, list[Callback]]:
        return {
            "train_start": [self.on_start],
            "step": [self.on_step],
            "validation": [self.on_validation],
            "epoch_end": [self.on_epoch_end],
        }
