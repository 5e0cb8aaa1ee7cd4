"""Model-agnostic training loop with callbacks, early stopping, cancel and exact resume.

Nothing here knows which captioner it trains: a model is anything with ``forward(batch) ->
logits (B, L, V)`` (see ``modeling.ml.models.base``). The Django side supplies a validation score
(CIDEr-D from the evaluation module), a progress callback writing to the TrainingRun row and a
cancel callable polling the Job; this module never imports them.

Events and their payloads (callbacks get ``(trainer, info)``)::

    "train_start"  {"total_steps", "steps_per_epoch", "device", "resumed_from_step"}
    "step"         {"step", "total_steps", "epoch", "loss", "lr"}     every log_every_steps
    "validation"   {"epoch", "step", "val_loss", "score", "improved"}
    "epoch_end"    the epoch's history row (see TrainResult.history)
    "checkpoint"   {"kind": "last" | "best", "path"}
    "train_end"    {"stopped", "best_score", "steps"}
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from modeling.ml.checkpoint import read_checkpoint, save_checkpoint
from modeling.ml.config import RunConfig, TrainConfig
from modeling.ml.data import BucketBatchSampler, CaptionDataset, CaptionItem, collate
from modeling.ml.models.base import Batch, Captioner, caption_loss
from modeling.ml.registry import build_model
from modeling.ml.vocab import Vocabulary

Callback = Callable[["Trainer", dict[str, Any]], None]
EVENTS = ("train_start", "step", "validation", "epoch_end", "checkpoint", "train_end")
LAST, BEST = "last.pt", "best.pt"


@dataclass
class TrainResult:
    """What a run produced."""

    # One row per completed epoch: epoch, step, train_loss, val_loss, score, lr, seconds.
    history: list[dict[str, Any]]
    best_checkpoint: Path | None  # None when nothing was ever validated
    last_checkpoint: Path
    best_score: float | None
    stopped: str  # "completed", "early_stopping" or "cancelled"
    steps: int


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy (when installed) and torch, CPU and CUDA."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:  # numpy is optional for this package
        pass
    else:
        np.random.seed(seed % 2**32)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"train.device={name!r} but CUDA is not available on this machine")
    return device


def to_device(batch: Batch, device: torch.device) -> Batch:
    # non_blocking pairs with pin_memory: the copy overlaps with the previous step's compute.
    return {key: value.to(device, non_blocking=True) for key, value in batch.items()}


class Trainer:
    """Trains one captioner; ``fit()`` runs (or resumes) the loop and returns a TrainResult."""

    def __init__(
        self,
        model: Captioner,
        *,
        model_name: str,
        config: TrainConfig,
        vocab: Vocabulary,
        train_items: Sequence[CaptionItem],
        out_dir: str | Path,
        val_items: Sequence[CaptionItem] | None = None,
        score_fn: Callable[[Captioner], float] | None = None,
        cancel: Callable[[], bool] | None = None,
        feature_config: Any = None,
        run_config: RunConfig | None = None,
    ) -> None:
        if not train_items:
            raise ValueError("the training set is empty")
        self.model = model
        self.model_name = model_name
        self.config = config
        self.vocab = vocab
        # prepare() fills the 1NN bank before the first epoch (see Captioner.prepare).
        self.train_set = CaptionDataset(model.prepare(train_items))
        self.val_set = CaptionDataset(val_items) if val_items else None
        self.out_dir = Path(out_dir)
        # Higher is better; without one, the negative validation loss is the score.
        self.score_fn = score_fn
        self.cancel = cancel or (lambda: False)
        self.feature_config = feature_config
        self.run_config = run_config
        self.device = pick_device(config.device)
        self.callbacks: dict[str, list[Callback]] = {event: [] for event in EVENTS}
        self.optimizer = self._make_optimizer() if model.trainable else None
        use_cuda = self.device.type == "cuda"
        self.amp_dtype = (
            (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
            if config.amp and use_cuda
            else None
        )
        # Loss scaling is only needed for float16; bfloat16 has float32's range.
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp_dtype == torch.float16)
        self.sampler = BucketBatchSampler(
            self.train_set.lengths,
            config.batch_size,
            bucket_batches=config.bucket_batches,
            shuffle=True,
            seed=config.seed,
        )
        self.loader = DataLoader(
            self.train_set,
            batch_sampler=self.sampler,
            collate_fn=collate,
            num_workers=config.num_workers,
            pin_memory=use_cuda,
            persistent_workers=config.num_workers > 0,
            # Each DataLoader iterator draws a seed from this generator; left to the global RNG,
            # starting an epoch would shift dropout's random stream and break exact resume.
            generator=torch.Generator().manual_seed(config.seed),
        )
        self.steps_per_epoch = len(self.sampler.batches())
        self.warmup_steps = round(config.warmup_epochs * self.steps_per_epoch)
        # Loop state; all of it goes into the "last" checkpoint so a resume is exact.
        self.state: dict[str, Any] = {
            "step": 0,
            "epoch": 0,
            "batch_in_epoch": 0,
            "epoch_loss_sum": 0.0,
            "epoch_loss_count": 0,
            "best_score": None,
            "bad_validations": 0,
            "plateau_bad": 0,
            "plateau_scale": 1.0,
            "history": [],
        }

    # ------------------------------------------------------------------ callbacks

    def add_callback(self, event: str, callback: Callback) -> None:
        if event not in self.callbacks:
            raise ValueError(f"unknown trainer event '{event}' (known: {', '.join(EVENTS)})")
        self.callbacks[event].append(callback)

    def _emit(self, event: str, info: dict[str, Any]) -> None:
        for callback in self.callbacks[event]:
            callback(self, info)

    # ------------------------------------------------------------------ pieces

    def _make_optimizer(self) -> torch.optim.Optimizer:
        params = [p for p in self.model.parameters() if p.requires_grad]
        cfg = self.config
        kind = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[cfg.optimizer]
        return kind(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)

    def learning_rate(self, step: int, epoch: int) -> float:
        """Linear warm-up over the first warmup steps, then per-epoch decay and plateau cuts."""
        cfg = self.config
        warm = min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps else 1.0
        return cfg.lr * warm * cfg.lr_decay_per_epoch**epoch * self.state["plateau_scale"]

    def _autocast(self) -> Any:
        if self.amp_dtype is None:
            return torch.autocast(self.device.type, enabled=False)
        return torch.autocast("cuda", dtype=self.amp_dtype)

    def _train_step(self, batch: Batch) -> float:
        assert self.optimizer is not None
        lr = self.learning_rate(self.state["step"], self.state["epoch"])
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with self._autocast():
            logits = self.model(batch)
            loss = caption_loss(
                logits.float(), batch["tokens"], label_smoothing=self.config.label_smoothing
            )
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"training loss is {loss.item()} at step {self.state['step']} "
                f"(lr {lr:.3g}); lower train.lr or enable train.grad_clip"
            )
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if self.config.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return float(loss.detach())

    @torch.no_grad()
    def validation_loss(self) -> float | None:
        """Mean token cross-entropy (no smoothing) on the validation set."""
        if self.val_set is None:
            return None
        self.model.eval()
        loader = DataLoader(self.val_set, batch_size=self.config.batch_size, collate_fn=collate)
        total, tokens = 0.0, 0
        for batch in loader:
            batch = to_device(batch, self.device)
            with self._autocast():
                logits = self.model(batch)
            n = int((batch["tokens"][:, 1:] != 0).sum())
            total += float(caption_loss(logits.float(), batch["tokens"])) * n
            tokens += n
        return total / max(1, tokens)

    def _validate(self) -> dict[str, Any]:
        val_loss = self.validation_loss()
        self.model.eval()
        if self.score_fn is not None:
            score: float | None = float(self.score_fn(self.model))
        else:
            score = -val_loss if val_loss is not None else None
        best = self.state["best_score"]
        improved = score is not None and (best is None or score > best)
        if improved:
            self.state["best_score"] = score
            self.state["bad_validations"] = self.state["plateau_bad"] = 0
            self._save(BEST)
        elif score is not None:
            self.state["bad_validations"] += 1
            self.state["plateau_bad"] += 1
            patience = self.config.plateau_patience
            if patience is not None and self.state["plateau_bad"] >= patience:
                self.state["plateau_scale"] *= self.config.plateau_factor
                self.state["plateau_bad"] = 0
        info = {
            "epoch": self.state["epoch"],
            "step": self.state["step"],
            "val_loss": val_loss,
            "score": score,
            "improved": improved,
        }
        self._emit("validation", info)
        return info

    def _save(self, name: str) -> Path:
        trainer_state = dict(
            self.state, rng=torch.get_rng_state(), python_rng=list(random.getstate()[1])
        )
        if torch.cuda.is_available():
            trainer_state["cuda_rng"] = torch.cuda.get_rng_state_all()
        path = save_checkpoint(
            self.out_dir / name,
            model_name=self.model_name,
            model=self.model,
            vocab=self.vocab,
            feature_config=self.feature_config,
            run_config=self.run_config,
            step=self.state["step"],
            epoch=self.state["epoch"],
            best_score=self.state["best_score"],
            optimizer=self.optimizer,
            trainer_state=trainer_state,
        )
        self._emit("checkpoint", {"kind": name.removesuffix(".pt"), "path": path})
        return path

    def _resume(self, path: str | Path) -> None:
        payload = read_checkpoint(path, map_location=self.device)
        if payload["model_name"] != self.model_name:
            raise ValueError(
                f"{path}: checkpoint of model '{payload['model_name']}', not '{self.model_name}'"
            )
        self.model.load_state_dict(payload["state_dict"], strict=True)
        if self.optimizer is not None and payload.get("optimizer") is not None:
            self.optimizer.load_state_dict(payload["optimizer"])
        saved = payload.get("trainer_state") or {}
        for key in self.state:
            if key in saved:
                self.state[key] = saved[key]
        if "rng" in saved:
            torch.set_rng_state(saved["rng"].cpu())
        if "python_rng" in saved:
            random.setstate((3, tuple(saved["python_rng"]), None))
        if "cuda_rng" in saved and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in saved["cuda_rng"]])

    def _finish(self, stopped: str) -> TrainResult:
        last = self._save(LAST)
        best = self.out_dir / BEST
        result = TrainResult(
            history=list(self.state["history"]),
            best_checkpoint=best if best.exists() else None,
            last_checkpoint=last,
            best_score=self.state["best_score"],
            stopped=stopped,
            steps=self.state["step"],
        )
        self._emit(
            "train_end",
            {"stopped": stopped, "best_score": result.best_score, "steps": result.steps},
        )
        return result

    # ------------------------------------------------------------------ the loop

    def fit(self, resume_from: str | Path | None = None) -> TrainResult:
        self.model.to(self.device)
        if resume_from is not None:
            self._resume(resume_from)
        cfg = self.config
        total_steps = cfg.epochs * self.steps_per_epoch if self.model.trainable else 0
        self._emit(
            "train_start",
            {
                "total_steps": total_steps,
                "steps_per_epoch": self.steps_per_epoch,
                "device": str(self.device),
                "resumed_from_step": self.state["step"],
            },
        )
        if not self.model.trainable:
            # 1NN: "training" is filling the bank; validate once so the run has a score.
            self._validate()
            return self._finish("completed")

        while self.state["epoch"] < cfg.epochs:
            epoch = self.state["epoch"]
            started = time.perf_counter()
            self.sampler.set_epoch(epoch, skip=self.state["batch_in_epoch"])
            self.model.train()
            for batch in self.loader:
                if self.cancel():
                    return self._finish("cancelled")
                loss = self._train_step(to_device(batch, self.device))
                self.state["step"] += 1
                self.state["batch_in_epoch"] += 1
                self.state["epoch_loss_sum"] += loss
                self.state["epoch_loss_count"] += 1
                step = self.state["step"]
                if step % cfg.log_every_steps == 0:
                    self._emit(
                        "step",
                        {
                            "step": step,
                            "total_steps": total_steps,
                            "epoch": epoch,
                            "loss": loss,
                            "lr": self.learning_rate(step - 1, epoch),
                        },
                    )
                if cfg.checkpoint_every_steps and step % cfg.checkpoint_every_steps == 0:
                    self._save(LAST)
            if self.cancel():
                return self._finish("cancelled")

            train_loss = self.state["epoch_loss_sum"] / max(1, self.state["epoch_loss_count"])
            self.state.update(
                epoch=epoch + 1, batch_in_epoch=0, epoch_loss_sum=0.0, epoch_loss_count=0
            )
            validated = (epoch + 1) % cfg.validate_every == 0 or epoch + 1 == cfg.epochs
            info = self._validate() if validated else {"val_loss": None, "score": None}
            row = {
                "epoch": epoch + 1,
                "step": self.state["step"],
                "train_loss": train_loss,
                "val_loss": info["val_loss"],
                "score": info["score"],
                "lr": self.learning_rate(self.state["step"] - 1, epoch),
                "seconds": time.perf_counter() - started,
            }
            self.state["history"].append(row)
            self._emit("epoch_end", row)
            self._save(LAST)
            patience = cfg.early_stopping_patience
            if validated and patience is not None and self.state["bad_validations"] >= patience:
                return self._finish("early_stopping")
        return self._finish("completed")


def train(
    *,
    run: RunConfig,
    vocab: Vocabulary,
    train_items: Sequence[CaptionItem],
    out_dir: str | Path,
    val_items: Sequence[CaptionItem] | None = None,
    score_fn: Callable[[Captioner], float] | None = None,
    callbacks: dict[str, Sequence[Callback]] | None = None,
    cancel: Callable[[], bool] | None = None,
    feature_config: Any = None,
    resume_from: str | Path | None = None,
) -> TrainResult:
    """Build ``run.model_name`` for ``vocab``, train it on ``train_items`` and return the result.

    The entry point for the Django glue and the benchmarks: seeds everything from
    ``run.train.seed`` first, so the same inputs give the same run.
    """
    seed_everything(run.train.seed)
    model = build_model(run.model_name, run.model, vocab_size=len(vocab))
    run = dataclasses.replace(run, model=model.config)
    trainer = Trainer(
        model,
        model_name=run.model_name,
        config=run.train,
        vocab=vocab,
        train_items=train_items,
        out_dir=out_dir,
        val_items=val_items,
        score_fn=score_fn,
        cancel=cancel,
        feature_config=feature_config,
        run_config=run,
    )
    for event, fns in (callbacks or {}).items():
        for fn in fns:
            trainer.add_callback(event, fn)
    return trainer.fit(resume_from)
