"""Model-agnostic training loop with callbacks, early stopping, cancel and exact resume.

Nothing here knows which captioner it trains: a model is anything with ``forward(batch) ->
logits (B, L, V)`` (see ``modeling.ml.models.base``). The Django side supplies a validation score
(CIDEr-D from the evaluation module), a progress callback writing to the TrainingRun row and a
cancel callable polling the Job; this module never imports them.

One module (above 600 lines) because it is one loop: stages, data-parallel training, AMP,
validation, checkpoints and callbacks all act on the same ``TrainerState`` batch by batch. The
loop's bookkeeping types are in ``train_state``; device and seeding helpers in ``runtime``.

Optional model hooks, used when present:

- ``pretrain_loss(batch, *, label_smoothing) -> loss`` (or ``(loss, figures)``, the figures
  floats that go into the "step" event) is the model's own pre-training
  stage, run for ``train.pretrain_epochs`` epochs before caption training: over the clips
  (MAAC's keyword encoder BCE on batch["keyword_targets"]), or over the captions when the
  model's ``pretrain_per_caption`` is true (the AV captioner's MBP loss).
- ``pretrain_frozen_parameters() -> parameters`` are kept fixed in the first
  ``train.pretrain_frozen_epochs`` of pre-training (MAAC's pretrained ResNet38 backbone).
- ``set_whole_model(enabled)``: a model that keeps a part fixed while captions train (MAAC's
  keyword encoder) trains all of it while enabled; the loop enables it in the fine-tune
  stage (``train.finetune_epochs``) and disables it in every other stage.

Every stage reads batches of its own size: ``train.pretrain_frozen_batch_size``,
``pretrain_batch_size`` and ``finetune_batch_size`` (None: ``train.batch_size``).

With ``train.scheduled_sampling`` the cross-entropy stages (captions, fine-tune) feed the model
some of its own predictions as input words (``modeling.ml.scheduled_sampling``), at a rate
rising over each stage's epochs.

Pre-training batches may be mixed (``train.pretrain_mixup_alpha``) and striped
(``train.pretrain_spec_augment_pp``) by ``modeling.ml.augment``.

Launched by torchrun (RANK, WORLD_SIZE, LOCAL_RANK in the environment) the trainer trains
data-parallel (``modeling.ml.distributed``): it joins the process group, each rank trains on its
own share of every epoch's batches (``BucketBatchSampler`` over a ``DistributedSampler``), the
loss runs inside ``DistributedDataParallel`` so gradients are averaged, and rank 0 alone
validates, calls the callbacks, polls ``cancel`` and writes checkpoints; it broadcasts what it
decided (scores, early stopping, a cancel) so every rank takes the same path. The losses in
the "step" events and the history are rank 0's own batches.

With ``train.spec_augment`` every training batch's features are masked (``features.SpecAugment``)
before the loss; validation, scoring and decoding read the features as they are.

With ``train.scst_epochs`` a self-critical stage (``modeling.ml.scst``) follows caption training,
starting from its best weights (or its last, ``train.scst_from``), on
``reward_fn(captions, clip_ids)`` supplied by the caller. The stages share one epoch counter
(pre-training epochs first), the optimizer and checkpoints, so a cancelled run resumes in
whichever stage it stopped.

Learning rate of step s of a stage of S steps: the stage's rate (``lr``, ``pretrain_lr``,
``pretrain_frozen_lr``, ``scst_lr``) x a linear warm-up (``warmup_epochs`` of caption training,
or ``warmup_fraction`` of every stage) x, with ``lr_schedule="linear_decay"``, a linear decay
to 0 at the stage's end x ``lr_decay_per_epoch`` per epoch of the stage x plateau cuts.

``score_fn(model)`` returns the validation score (higher is better), or a mapping holding it
under "score" and further figures by name, one of which ``train.plateau_metric`` may name.

Events and their payloads (callbacks get ``(trainer, info)``)::

    "train_start"  {"total_steps", "steps_per_epoch", "device", "resumed_from_step", "stages"}
    "step"         {"step", "total_steps", "epoch", "loss", "lr", "stage", "figures"}
                   every log_every_steps; figures: the model's or SCST's per-step figures
    "validation"   {"epoch", "step", "val_loss", "score", "improved"}
    "epoch_end"    the epoch's history row (see TrainResult.history)
    "checkpoint"   {"kind": "last" | "best", "path", "final"}: final for the "last" written
                   when training ends; the others come after every epoch, every
                   checkpoint_every_steps and every checkpoint_every_seconds
    "train_end"    {"stopped", "best_score", "steps"}
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from modeling.ml import distributed
from modeling.ml.augment import SpecAugmentPP, mixup
from modeling.ml.checkpoint import read_checkpoint, save_checkpoint
from modeling.ml.config import RunConfig, TrainConfig, check_train_config
from modeling.ml.data import (
    BucketBatchSampler,
    CaptionDataset,
    CaptionItem,
    clip_items,
    collate,
    collate_with_ids,
)
from modeling.ml.models.base import Batch, Captioner, caption_loss
from modeling.ml.models.encoded import EncodedCaptioner
from modeling.ml.registry import build_model
from modeling.ml.runtime import pick_device, seed_everything, to_device
from modeling.ml.scheduled_sampling import sampling_probability, scheduled_batch
from modeling.ml.scst import ClipRewardFn, scst_loss
from modeling.ml.train_state import (
    CAPTION,
    CROSS_ENTROPY,
    FINETUNE,
    PRETRAIN,
    PRETRAIN_FROZEN,
    SCST,
    Stage,
    TrainerState,
    TrainResult,
    run_stages,
)
from modeling.ml.vocab import Vocabulary

Callback = Callable[["Trainer", dict[str, Any]], None]
# score_fn(model) -> the validation score, or {"score": it, other figures by name}
ScoreFn = Callable[[Captioner], float | Mapping[str, float]]
EVENTS = ("train_start", "step", "validation", "epoch_end", "checkpoint", "train_end")
LAST, BEST = "last.pt", "best.pt"


@dataclass(frozen=True)
class _Feed:
    """A training set as the loop reads it: length-bucketed batches of this rank's share,
    in an order fixed by (seed, epoch), and the loader collating them."""

    dataset: CaptionDataset
    sampler: BucketBatchSampler
    loader: DataLoader
    steps_per_epoch: int


class _LossModule(torch.nn.Module):
    """The trainer's loss as a module, so DistributedDataParallel can wrap it: every stage's
    loss (captions, the model's own hooks, SCST) then runs inside DDP's forward, and its
    backward averages the gradients across ranks."""

    def __init__(self, trainer: Trainer) -> None:
        super().__init__()
        self.model = trainer.model
        self._loss = trainer._loss

    def forward(self, stage: Stage, batch: Batch, clip_ids: list[str]) -> tuple[Any, dict]:
        return self._loss(stage, batch, clip_ids)


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
        score_fn: ScoreFn | None = None,
        cancel: Callable[[], bool] | None = None,
        feature_config: Any = None,
        run_config: RunConfig | None = None,
        reward_fn: ClipRewardFn | None = None,
        checkpoint_every_seconds: float | None = None,
    ) -> None:
        _check_settings(model, model_name, config, train_items, reward_fn)
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
        self.reward_fn = reward_fn
        # Within a long epoch, "last" is also saved this often (wall clock, rank 0's), so a
        # crash loses at most this much training.
        self.checkpoint_every_seconds = checkpoint_every_seconds
        self._last_saved = time.monotonic()
        self.world = distributed.setup()
        self.device = self._pick_device()
        self.ddp: torch.nn.Module | None = None  # built in fit(), once the model is on device
        # Training-time augmentation of batch["features"]; the validation, scoring and
        # decoding paths never call it.
        self.augment = _spec_augment(config)
        self.spec_augment_pp = _spec_augment_pp(config)
        # parameters the frozen-backbone pre-training keeps fixed, while it runs
        self.frozen: list[torch.nn.Parameter] = []
        self.callbacks: dict[str, list[Callback]] = {event: [] for event in EVENTS}
        self.optimizer = self._make_optimizer() if model.trainable else None
        self.amp_dtype = self._amp_dtype()
        # Loss scaling is only needed for float16; bfloat16 has float32's range.
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp_dtype == torch.float16)
        self.stages = run_stages(config)
        self.caption_feed = self._feed(self.train_set, config.batch_size)
        # The clip-level stages (pre-training unless the model pre-trains on captions,
        # self-critical) see each clip once per epoch. Each (dataset, batch size) a stage
        # reads has one feed.
        clip_set = (
            CaptionDataset(clip_items(self.train_set.items))
            if any(self._reads_clips(stage) for stage in self.stages)
            else None
        )
        self._feeds: dict[tuple[bool, int], _Feed] = {(False, config.batch_size): self.caption_feed}
        for stage in self.stages:
            key = (self._reads_clips(stage), self.batch_size_of(stage))
            if key not in self._feeds:
                dataset = clip_set if key[0] else self.train_set
                assert dataset is not None
                self._feeds[key] = self._feed(dataset, key[1])
        self.total_epochs = sum(stage.epochs for stage in self.stages)
        self.state = TrainerState()

    @property
    def sampler(self) -> BucketBatchSampler:
        """The caption stage's batch sampler."""
        return self.caption_feed.sampler

    @property
    def steps_per_epoch(self) -> int:
        """Optimisation steps in one caption-training epoch (this rank's)."""
        return self.caption_feed.steps_per_epoch

    def _pick_device(self) -> torch.device:
        device = pick_device(self.config.device)
        if self.world.distributed and device.type == "cuda":
            return torch.device("cuda", self.world.local_rank)  # one GPU per process
        return device

    def _amp_dtype(self) -> torch.dtype | None:
        """Mixed precision on CUDA: bfloat16 where supported, else float16; None off CUDA."""
        if not (self.config.amp and self.device.type == "cuda"):
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16

    def _feed(self, dataset: CaptionDataset, batch_size: int) -> _Feed:
        config = self.config
        sampler = BucketBatchSampler(
            dataset.lengths,
            batch_size,
            bucket_batches=config.bucket_batches,
            shuffle=True,
            seed=config.seed,
            num_replicas=self.world.size,
            rank=self.world.rank,
        )
        return _Feed(
            dataset=dataset,
            sampler=sampler,
            loader=self._loader(dataset, sampler),
            steps_per_epoch=len(sampler.batches()),
        )

    def _reads_clips(self, stage: Stage) -> bool:
        if stage.name == SCST:
            return True
        return stage.pretraining and not getattr(self.model, "pretrain_per_caption", False)

    def batch_size_of(self, stage: Stage) -> int:
        """The batch size ``stage`` trains with: its own setting, else ``train.batch_size``."""
        cfg = self.config
        own = {
            PRETRAIN_FROZEN: cfg.pretrain_frozen_batch_size,
            PRETRAIN: cfg.pretrain_batch_size,
            FINETUNE: cfg.finetune_batch_size,
        }.get(stage.name)
        return own or cfg.batch_size

    def _feed_of(self, stage: Stage) -> _Feed:
        return self._feeds[(self._reads_clips(stage), self.batch_size_of(stage))]

    def _loader(self, dataset: CaptionDataset, sampler: BucketBatchSampler) -> DataLoader:
        use_cuda = self.device.type == "cuda"
        return DataLoader(
            dataset,
            batch_sampler=sampler,
            collate_fn=collate_with_ids,
            num_workers=self.config.num_workers,
            pin_memory=use_cuda,
            persistent_workers=self.config.num_workers > 0,
            # Each DataLoader iterator draws a seed from this generator; left to the global RNG,
            # starting an epoch would shift dropout's random stream and break exact resume.
            generator=torch.Generator().manual_seed(self.config.seed),
        )

    def stage_of(self, epoch: int) -> Stage:
        for stage in self.stages:
            if stage.first_epoch <= epoch < stage.end:
                return stage
        raise ValueError(f"epoch {epoch} is outside the run's {self.total_epochs} epochs")

    def _stage_steps(self, stage: Stage) -> int:
        return stage.epochs * self._feed_of(stage).steps_per_epoch

    # ------------------------------------------------------------------ callbacks

    def add_callback(self, event: str, callback: Callback) -> None:
        if event not in self.callbacks:
            raise ValueError(f"unknown trainer event '{event}' (known: {', '.join(EVENTS)})")
        self.callbacks[event].append(callback)

    def _emit(self, event: str, info: dict[str, Any]) -> None:
        if not self.world.is_main:
            return
        for callback in self.callbacks[event]:
            callback(self, info)

    # ------------------------------------------------------------------ pieces

    def _make_optimizer(self) -> torch.optim.Optimizer:
        params = [p for p in self.model.parameters() if p.requires_grad]
        cfg = self.config
        kind = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[cfg.optimizer]
        return kind(
            params,
            lr=cfg.lr,
            betas=cfg.betas,
            eps=cfg.eps,
            weight_decay=cfg.weight_decay,
            amsgrad=cfg.amsgrad,
        )

    @property
    def warmup_steps(self) -> int:
        """Warm-up steps of caption training."""
        return self._warmup_steps(self.stage_of(self.caption_stage_epoch))

    @property
    def caption_stage_epoch(self) -> int:
        return self.config.pretrain_frozen_epochs + self.config.pretrain_epochs

    def _warmup_steps(self, stage: Stage) -> int:
        cfg = self.config
        if cfg.warmup_fraction:
            return round(cfg.warmup_fraction * self._stage_steps(stage))
        if stage.name == CAPTION and not cfg.warmup_per_epoch:
            return round(cfg.warmup_epochs * self.steps_per_epoch)
        return 0

    def _base_rate(self, stage: Stage) -> float:
        cfg = self.config
        if stage.name == SCST:
            return cfg.scst_lr
        if stage.name == FINETUNE:
            return cfg.finetune_lr
        if stage.name == PRETRAIN_FROZEN:
            return cfg.pretrain_frozen_lr or cfg.pretrain_lr or cfg.lr
        if stage.name == PRETRAIN:
            return cfg.pretrain_lr or cfg.lr
        return cfg.lr

    def learning_rate(self, step: int, epoch: int) -> float:
        """Caption training's rate at ``step`` of ``epoch`` (both counted from its start)."""
        stage = self.stage_of(self.caption_stage_epoch)
        return self.stage_learning_rate(stage, stage.first_epoch + epoch, step)

    def stage_learning_rate(self, stage: Stage, epoch: int, stage_step: int) -> float:
        """The learning rate of step ``stage_step`` of ``stage`` in global ``epoch``."""
        cfg = self.config
        in_stage = epoch - stage.first_epoch
        warmup = self._warmup_steps(stage)
        rate = self._base_rate(stage)
        if stage.name == CAPTION:
            if cfg.warmup_per_epoch and cfg.warmup_epochs:
                # one rate per epoch, as a scheduler stepped once an epoch gives it
                rate *= min(1.0, (in_stage + 1) / cfg.warmup_epochs)
            rate *= cfg.lr_milestone_factor ** sum(in_stage + 1 >= m for m in cfg.lr_milestones)
        if warmup and stage_step < warmup:
            rate *= (stage_step + 1) / warmup
        elif cfg.lr_schedule == "linear_decay":
            total = self._stage_steps(stage)
            rate *= max(0.0, (total - stage_step) / max(1, total - warmup))
        return rate * cfg.lr_decay_per_epoch**in_stage * self.state.plateau_scale

    def _autocast(self) -> Any:
        if self.amp_dtype is None:
            return torch.autocast(self.device.type, enabled=False)
        return torch.autocast("cuda", dtype=self.amp_dtype)

    def _loss(self, stage: Stage, batch: Batch, clip_ids: list[str]) -> tuple[Any, dict]:
        """This stage's loss on one batch, and the figures to log with it."""
        model: Any = self.model
        smoothing = self.config.label_smoothing
        if stage.pretraining:
            out = model.pretrain_loss(batch, label_smoothing=smoothing)
            if isinstance(out, tuple):
                loss, figures = out
                return loss, {k: float(v) for k, v in figures.items() if k != "loss"}
            return out, {}
        if stage.name == SCST:
            assert self.reward_fn is not None
            reward_fn = self.reward_fn

            def reward(captions: list[list[int]], rows: list[int]) -> Sequence[float]:
                return reward_fn(captions, [clip_ids[row] for row in rows])

            scst = scst_loss(
                self.model,
                batch,
                reward,
                max_length=self.vocab.max_length,
                n_samples=self.config.scst_samples,
            )
            figures = {"reward": scst.sample_reward, "baseline_reward": scst.baseline_reward}
            return scst.loss, figures
        fed = batch
        p = self.sampling_probability(stage, self.state.epoch)
        if p > 0.0:
            fed = scheduled_batch(self.model, batch, p)
        logits = self.model(fed)
        loss = caption_loss(logits.float(), batch["tokens"], label_smoothing=smoothing)
        return loss, ({"sampling_p": p} if p > 0.0 else {})

    def sampling_probability(self, stage: Stage, epoch: int) -> float:
        """Scheduled sampling's rate in global ``epoch`` of ``stage`` (0 outside the
        cross-entropy stages or without ``train.scheduled_sampling``)."""
        if stage.name not in CROSS_ENTROPY:
            return 0.0
        return sampling_probability(
            self.config.scheduled_sampling, epoch - stage.first_epoch, stage.epochs
        )

    def augmented(self, batch: Batch, stage: Stage | None = None) -> Batch:
        """The training batch as ``stage`` trains on it: in pre-training mixed (mixup) and
        striped (SpecAugment++) when enabled, then in every stage SpecAugment on "features"
        (when enabled)."""
        cfg = self.config
        if stage is not None and stage.pretraining:
            if cfg.pretrain_mixup_alpha:
                batch = mixup(batch, cfg.pretrain_mixup_alpha)
            if self.spec_augment_pp is not None:
                batch = self.spec_augment_pp(batch)
        if self.augment is None:
            return batch
        features = self.augment(batch["features"], batch["feature_lengths"])
        return {**batch, "features": features}

    def _freeze_for(self, stage: Stage) -> None:
        """Keep the model's backbone fixed in frozen-backbone pre-training (no gradients),
        and trainable again afterwards; the whole model trains in the fine-tune stage (the
        model's ``set_whole_model`` hook, where it has one)."""
        whole = getattr(self.model, "set_whole_model", None)
        if whole is not None:
            whole(stage.name == FINETUNE)
        if stage.name == PRETRAIN_FROZEN and not self.frozen:
            model: Any = self.model
            self.frozen = [p for p in model.pretrain_frozen_parameters() if p.requires_grad]
            for param in self.frozen:
                param.requires_grad_(False)
        elif stage.name != PRETRAIN_FROZEN and self.frozen:
            for param in self.frozen:
                param.requires_grad_(True)
            self.frozen = []

    def _train_step(self, stage: Stage, batch: Batch, clip_ids: list[str]) -> tuple[float, dict]:
        assert self.optimizer is not None
        batch = self.augmented(batch, stage)
        lr = self.stage_learning_rate(stage, self.state.epoch, self.state.stage_step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with self._autocast():
            if self.ddp is not None:
                loss, figures = self.ddp(stage, batch, clip_ids)
            else:
                loss, figures = self._loss(stage, batch, clip_ids)
            loss = loss.float()
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"training loss is {loss.item()} at step {self.state.step} "
                f"(lr {lr:.3g}); lower train.lr or enable train.grad_clip"
            )
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        for param in self.frozen:
            # no update at all (data-parallel training may hand back zeros, which Adam's
            # moments would still move on); a parameter without a gradient is skipped
            param.grad = None
        if self.config.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return float(loss.detach()), figures

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
        # rank 0 validates (the other ranks hold the same weights) and shares the outcome
        val_loss: float | None = None
        score: float | None = None
        figures: dict[str, float] = {}
        if self.world.is_main:
            val_loss = self.validation_loss()
            self.model.eval()
            if self.score_fn is not None:
                result = self.score_fn(self.model)
                if isinstance(result, Mapping):
                    figures = {k: float(v) for k, v in result.items() if k != "score"}
                    result = result["score"]
                score = float(result)
            else:
                score = -val_loss if val_loss is not None else None
        val_loss, score, figures = distributed.broadcast(self.world, (val_loss, score, figures))
        state = self.state
        improved = score is not None and (state.best_score is None or score > state.best_score)
        if improved:
            state.best_score = score
            state.bad_validations = 0
            self._save(BEST)
        elif score is not None:
            state.bad_validations += 1
        if score is not None:
            self._judge_plateau(score, figures, improved)
        info = {
            "epoch": state.epoch,
            "step": state.step,
            "val_loss": val_loss,
            "score": score,
            "improved": improved,
            "figures": figures,
        }
        self._emit("validation", info)
        return info

    def _judge_plateau(self, score: float, figures: Mapping[str, float], improved: bool) -> None:
        """Counts validations without gain on the plateau figure (the score, or the
        ``plateau_metric`` figure) and cuts the learning rate after ``plateau_patience``."""
        cfg, state = self.config, self.state
        if cfg.plateau_metric:
            if cfg.plateau_metric not in figures:
                given = ", ".join(sorted(figures)) or "only the score"
                raise ValueError(
                    f"train.plateau_metric={cfg.plateau_metric!r}: the validation gives no "
                    f"such figure (it gives {given})"
                )
            value = figures[cfg.plateau_metric]
            improved = state.plateau_best is None or value > state.plateau_best
            if improved:
                state.plateau_best = value
        if improved:
            state.plateau_bad = 0
            return
        state.plateau_bad += 1
        if cfg.plateau_patience is not None and state.plateau_bad >= cfg.plateau_patience:
            state.plateau_scale *= cfg.plateau_factor
            state.plateau_bad = 0

    def _save(self, name: str, *, final: bool = False) -> Path:
        if not self.world.is_main:  # one writer; the others know where it is
            return self.out_dir / name
        if name == LAST:
            self._last_saved = time.monotonic()
        path = save_checkpoint(
            self.out_dir / name,
            model_name=self.model_name,
            model=self.model,
            vocab=self.vocab,
            feature_config=self.feature_config,
            run_config=self.run_config,
            step=self.state.step,
            epoch=self.state.epoch,
            best_score=self.state.best_score,
            optimizer=self.optimizer,
            trainer_state=self.state.saved(),
        )
        self._emit("checkpoint", {"kind": name.removesuffix(".pt"), "path": path, "final": final})
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
        self.state = TrainerState.restore(payload.get("trainer_state") or {})

    def _finish(self, stopped: str) -> TrainResult:
        last = self._save(LAST, final=True)
        distributed.barrier(self.world)  # every rank returns a checkpoint that exists
        best = self.out_dir / BEST
        result = TrainResult(
            history=list(self.state.history),
            best_checkpoint=best if best.exists() else None,
            last_checkpoint=last,
            best_score=self.state.best_score,
            stopped=stopped,
            steps=self.state.step,
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
        if self.world.distributed and self.model.trainable:
            self._wrap_ddp()
        trainable = self.model.trainable
        total_steps = sum(self._stage_steps(stage) for stage in self.stages) if trainable else 0
        self._emit(
            "train_start",
            {
                "total_steps": total_steps,
                "steps_per_epoch": self.steps_per_epoch,
                "device": str(self.device),
                "resumed_from_step": self.state.step,
                "stages": [dataclasses.asdict(stage) for stage in self.stages],
            },
        )
        if not trainable:
            # 1NN: "training" is filling the bank; validate once so the run has a score.
            self._validate()
            return self._finish("completed")
        while self.state.epoch < self.total_epochs:
            epoch = self.state.epoch
            stage = self.stage_of(epoch)
            if epoch == stage.first_epoch and self.state.batch_in_epoch == 0:
                self._enter(stage)
            self._freeze_for(stage)
            started = time.perf_counter()
            if not self._train_epoch(stage, total_steps) or self._cancelled():
                return self._finish("cancelled")
            if self._end_epoch(stage, started):
                return self._finish("early_stopping")
        return self._finish("completed")

    def _wrap_ddp(self) -> None:
        from torch.nn.parallel import DistributedDataParallel

        # DDP copies rank 0's weights to the others here. Unused parameters are searched
        # for because stages use different parts of a model (MAAC's keyword encoder alone
        # in pre-training) and some captioners leave modules out of some batches.
        self.ddp = DistributedDataParallel(
            _LossModule(self),
            device_ids=[self.device.index] if self.device.type == "cuda" else None,
            find_unused_parameters=True,
        )
        # ranks share parameters, not dropout or SpecAugment draws
        torch.manual_seed(self.config.seed + 1_000_003 * self.world.rank + self.state.step)

    def _train_epoch(self, stage: Stage, total_steps: int) -> bool:
        """The rest of the current epoch's batches; False when cancelled in the middle."""
        state, cfg = self.state, self.config
        epoch = state.epoch
        feed = self._feed_of(stage)
        feed.sampler.set_epoch(epoch, skip=state.batch_in_epoch)
        self.model.train()
        for batch, clip_ids in feed.loader:
            if self._cancelled():
                return False
            loss, figures = self._train_step(stage, to_device(batch, self.device), clip_ids)
            state.step += 1
            state.stage_step += 1
            state.batch_in_epoch += 1
            state.epoch_loss_sum += loss
            state.epoch_loss_count += 1
            if state.step % cfg.log_every_steps == 0:
                self._emit(
                    "step",
                    {
                        "step": state.step,
                        "total_steps": total_steps,
                        "epoch": epoch,
                        "loss": loss,
                        "lr": self.stage_learning_rate(stage, epoch, state.stage_step - 1),
                        "stage": stage.name,
                        "figures": figures,
                    },
                )
            if self._checkpoint_due():
                self._save(LAST)
        return True

    def _checkpoint_due(self) -> bool:
        """Mid-epoch "last": every checkpoint_every_steps steps, or once
        checkpoint_every_seconds passed since the last one."""
        steps, seconds = self.config.checkpoint_every_steps, self.checkpoint_every_seconds
        if steps and self.state.step % steps == 0:
            return True
        return bool(seconds) and time.monotonic() - self._last_saved >= (seconds or 0)

    def _end_epoch(self, stage: Stage, started: float) -> bool:
        """Validates when due, records the epoch and saves "last"; True to stop early."""
        state, cfg = self.state, self.config
        epoch = state.epoch
        train_loss = state.end_epoch()
        in_stage = epoch + 1 - stage.first_epoch
        validated = not stage.pretraining and (
            in_stage % cfg.validate_every == 0 or epoch + 1 == stage.end
        )
        info = self._validate() if validated else {"val_loss": None, "score": None}
        # the rate of the epoch's last step, after any plateau cut this validation made
        lr = self.stage_learning_rate(stage, epoch, state.stage_step - 1)
        row = {
            "epoch": epoch + 1,
            "stage": stage.name,
            "step": state.step,
            "train_loss": train_loss,
            "val_loss": info["val_loss"],
            "score": info["score"],
            "lr": lr,
            "seconds": time.perf_counter() - started,
        }
        state.history.append(row)
        self._emit("epoch_end", row)
        patience = cfg.early_stopping_patience
        stop = validated and patience is not None and state.bad_validations >= patience
        if stop and stage.name in CROSS_ENTROPY and stage.end < self.total_epochs:
            # caption training has converged: go on to the next stage (fine-tune, SCST)
            state.epoch, stop = stage.end, False
        self._save(LAST)
        return stop

    def _cancelled(self) -> bool:
        """Rank 0 polls ``cancel``; every rank learns the answer (a collective each batch)."""
        return distributed.any_rank(
            self.world, self.world.is_main and bool(self.cancel()), self.device
        )

    def _enter(self, stage: Stage) -> None:
        """Start ``stage``: its own warm-up, patience and plateau; SCST from the best weights
        (unless ``scst_from`` is "last": it goes on from caption training's last epoch)."""
        self.state.enter_stage()
        distributed.barrier(self.world)  # rank 0's best.pt is complete before anyone reads it
        best = self.out_dir / BEST
        if stage.name == SCST and self.config.scst_from == "best" and best.exists():
            payload = read_checkpoint(best, map_location=self.device)
            self.model.load_state_dict(payload["state_dict"], strict=True)


def _check_settings(
    model: Captioner,
    model_name: str,
    config: TrainConfig,
    train_items: Sequence[CaptionItem],
    reward_fn: ClipRewardFn | None,
) -> None:
    """Raise ValueError for a run the trainer cannot carry out, before anything is built."""
    if not train_items:
        raise ValueError("the training set is empty")
    if config.pretrain_epochs > 0 and not hasattr(model, "pretrain_loss"):
        raise ValueError(
            f"train.pretrain_epochs={config.pretrain_epochs} but model '{model_name}' "
            "has no pre-training stage"
        )
    if config.pretrain_frozen_epochs > 0 and not (
        hasattr(model, "pretrain_loss") and hasattr(model, "pretrain_frozen_parameters")
    ):
        raise ValueError(
            f"train.pretrain_frozen_epochs={config.pretrain_frozen_epochs} but model "
            f"'{model_name}' has no backbone to keep frozen in pre-training"
        )
    model.config.check_training(config)
    if config.scst_epochs > 0 and reward_fn is None:
        raise ValueError(
            f"train.scst_epochs={config.scst_epochs} needs a reward function (reward_fn)"
        )
    check_train_config(config)
    if config.scst_samples < 1:
        raise ValueError(f"train.scst_samples must be at least 1, got {config.scst_samples}")


def _spec_augment_pp(config: TrainConfig) -> SpecAugmentPP | None:
    if config.pretrain_spec_augment_pp == "off":
        return None
    return SpecAugmentPP(
        mode=config.pretrain_spec_augment_pp,
        time_mask=config.spec_pp_time_mask,
        time_masks=config.spec_pp_time_masks,
        freq_mask=config.spec_pp_freq_mask,
        freq_masks=config.spec_pp_freq_masks,
    )


def _spec_augment(config: TrainConfig) -> torch.nn.Module | None:
    if not config.spec_augment:
        return None
    from modeling.ml.features import SpecAugment  # soundfile/torchaudio only if used

    return SpecAugment(
        time_mask=config.spec_time_mask,
        freq_mask=config.spec_freq_mask,
        n_time_masks=config.spec_time_masks,
        n_freq_masks=config.spec_freq_masks,
        p=config.spec_p,
    )


def train(
    *,
    run: RunConfig,
    vocab: Vocabulary,
    train_items: Sequence[CaptionItem],
    out_dir: str | Path,
    val_items: Sequence[CaptionItem] | None = None,
    score_fn: ScoreFn | None = None,
    callbacks: Mapping[str, Sequence[Callback]] | None = None,
    cancel: Callable[[], bool] | None = None,
    feature_config: Any = None,
    resume_from: str | Path | None = None,
    reward_fn: ClipRewardFn | None = None,
    checkpoint_every_seconds: float | None = None,
    start_weights: str | Path | None = None,
) -> TrainResult:
    """Build ``run.model_name`` for ``vocab``, train it on ``train_items`` and return the result.

    The entry point for the Django glue and the benchmarks: seeds everything from
    ``run.train.seed`` first, so the same inputs give the same run. ``resume_from``
    continues a checkpoint exactly (weights, optimizer, position); ``start_weights`` takes
    only a checkpoint's weights (same model, same vocabulary) and trains afresh from them.
    """
    seed_everything(run.train.seed)
    model = build_model(run.model_name, run.model, vocab_size=len(vocab))
    # a resumed run, or one started from a checkpoint, has the (maybe fine-tuned) encoder
    # weights and trained embeddings in that checkpoint
    pretrained = resume_from is None and start_weights is None
    if isinstance(model, EncodedCaptioner) and pretrained:
        model.load_encoder_weights()
    word_vectors = run.model.word_vectors_file()
    if word_vectors and pretrained:
        model.load_word_vectors(word_vectors, vocab)
    if start_weights is not None and resume_from is None:
        _load_start_weights(model, start_weights, model_name=run.model_name, vocab=vocab)
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
        reward_fn=reward_fn,
        checkpoint_every_seconds=checkpoint_every_seconds,
    )
    for event, fns in (callbacks or {}).items():
        for fn in fns:
            trainer.add_callback(event, fn)
    return trainer.fit(resume_from)


def _load_start_weights(
    model: Captioner, path: str | Path, *, model_name: str, vocab: Vocabulary
) -> None:
    """Loads a checkpoint's weights strictly into `model`, refusing one of another model or
    vocabulary (its embedding rows would mean other words)."""
    payload = read_checkpoint(path)
    if payload["model_name"] != model_name:
        raise ValueError(
            f"{path}: checkpoint of model '{payload['model_name']}', not '{model_name}'"
        )
    if payload["vocab"] != vocab.to_dict():
        raise ValueError(
            f"{path}: the checkpoint's vocabulary differs from this run's; a run starts from "
            "a checkpoint of the same vocabulary (the same snapshot and vocabulary settings)"
        )
    model.load_state_dict(payload["state_dict"], strict=True)
