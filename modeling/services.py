"""Training runs and suggestions: the Django side of modeling/ml.

`run_start` records what to train and queues it on the gpu queue; `run_execute` (the job)
builds the data from the run's snapshot, trains with modeling.ml.trainer, scores the val and
test splits with corpus.evaluation and stores the checkpoint; `clips_caption` runs beam
search with a run's checkpoint and stores Suggestions.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import transaction
from django.utils import timezone

from core.models import Job, Project
from core.services import job_enqueue
from corpus.models import Snapshot
from curation.models import Clip, Subset
from modeling import datasets
from modeling.ml import registry
from modeling.ml.config import (
    ConfigError,
    RunConfig,
    apply_overrides,
    check_train_config,
    train_preset,
)
from modeling.ml.config_av import MAACConfig
from modeling.ml.encoders import PRETRAINED
from modeling.ml.features import FeatureConfig, feature_preset
from modeling.ml.models.encoded import check_encoder_config
from modeling.ml.video import ENCODERS, VideoConfig
from modeling.models import Suggestion, TrainingRun

log = logging.getLogger(__name__)
ProgressFn = Callable[..., None]

# Input features per model when the config does not say: ACT's log-mels (32 kHz, 1024/640,
# 64 mels) for every model, since the pretrained embedders of the papers (VGGish, YAMNet)
# need weights these machines cannot download; the models' feature_dim follows them.
DEFAULT_FEATURES = "act"
# Training settings per model when not the trainer's defaults: MAAC trains in three stages
# (keyword pre-training, captions, SCST); without the first its frozen keyword encoder would
# stay random.
DEFAULT_TRAIN_PRESETS = {"maac": "maac"}
VALIDATION_METRICS = ("cider",)  # per epoch: CIDEr-D only (fast, no JVM start for METEOR)
FINAL_METRICS = ("bleu", "meteor", "rouge", "cider", "spice")
CURVE_LIMIT = 5000  # learning-curve rows kept in the row (oldest steps thinned out)


def _no_progress(*_: Any, **__: Any) -> None:
    pass


# Configuration -------------------------------------------------------------------------


def _sections(overrides: Sequence[str]) -> dict[str, list[str]]:
    """`key=value` overrides by section: "features" and "video" (their prefix removed),
    "run" for the rest."""
    out: dict[str, list[str]] = {"features": [], "video": [], "run": []}
    for item in overrides:
        head = item.strip().split(".", 1)[0]
        if head in ("features", "video"):
            out[head].append(item.strip().removeprefix(f"{head}."))
        else:
            out["run"].append(item)
    return out


def _with_video(model: Any, video: VideoConfig) -> Any:
    """The model config reading what `video` produces: raw frames through its trainable
    frame CNN, or the encoder's features; room for the most video rows a clip can have."""
    if video.encoder == "frames":
        model = dataclasses.replace(model, video_frame_size=video.size)
        rows = video.max_frames
    else:
        model = dataclasses.replace(model, video_frame_size=0, video_dim=video.feature_dim)
        per_chunk = ENCODERS[video.encoder][3]
        rows = -(-video.max_frames // video.chunk_frames) if per_chunk else video.max_frames
    for field in ("max_video_frames", "max_video_tokens"):
        if hasattr(model, field):
            model = dataclasses.replace(model, **{field: max(getattr(model, field), rows)})
    return model


def run_spec(
    *, model_name: str, preset: str = "small", overrides: Sequence[str] = ()
) -> dict[str, Any]:
    """The stored config of a run: {"run": RunConfig as a dict, "features": FeatureConfig
    as a dict} and, for models that read video, "video": VideoConfig as a dict.
    `overrides` are `key=value` strings: `features.*` keys set the feature config,
    `video.*` the video config, the others the RunConfig (`train.epochs=3`,
    `model.dropout=0.1`)."""
    sections = _sections(overrides)
    try:
        registry.lookup(model_name)
        train_name = DEFAULT_TRAIN_PRESETS.get(model_name)
        run = registry.run_config(
            model_name, preset=preset, train=train_preset(train_name) if train_name else None
        )
        run = apply_overrides(run, sections["run"])
        check_train_config(run.train)
        # a pretrained encoder reads the features it was trained on (features.* still apply)
        base = DEFAULT_FEATURES
        if run.model.encoder != "trainable":
            base = PRETRAINED[run.model.encoder][1]
        features = apply_overrides(feature_preset(base), sections["features"])
        # the model reads the features it is given, whatever its paper used
        model = dataclasses.replace(run.model, feature_dim=features.n_features)
        check_encoder_config(model_name, model)
        weights = model.encoder_weights
        if weights and not Path(weights).is_file():
            raise ValidationError(
                f"model.encoder_weights: no such file {weights} (on the machine that trains)."
            )
        video = None
        if registry.uses_video(model_name):
            video = apply_overrides(VideoConfig(), sections["video"])
            model = _with_video(model, video)
        elif sections["video"]:
            raise ValidationError(
                f"Model {model_name} reads no video; drop {', '.join(sections['video'])}."
            )
        if hasattr(model, "max_caption_length"):
            # room for the longest caption the vocabulary keeps, plus <bos> and <eos>
            longest = run.vocab.max_length + 2
            model = dataclasses.replace(
                model, max_caption_length=max(model.max_caption_length, longest)
            )
        run = dataclasses.replace(run, model=model)
    except (ConfigError, KeyError, ValueError) as exc:
        raise ValidationError(str(exc)) from None
    spec = {"run": dataclasses.asdict(run), "features": features.to_dict()}
    if video is not None:
        spec["video"] = video.to_dict()
    return spec


def _configs(run: TrainingRun) -> tuple[RunConfig, FeatureConfig]:
    return (
        registry.run_config_from_dict(run.config["run"]),
        FeatureConfig.from_dict(run.config["features"]),
    )


def _video_config(run: TrainingRun) -> VideoConfig | None:
    data = run.config.get("video")
    return VideoConfig.from_dict(data) if data is not None else None


# Starting, cancelling, resuming --------------------------------------------------------


def run_start(
    *,
    project: Project,
    model_name: str,
    snapshot: Snapshot,
    created_by: Any,
    preset: str = "small",
    overrides: Sequence[str] = (),
    enqueue: bool = True,
) -> TrainingRun:
    """Records a run and (with `enqueue`) queues its training on the gpu queue."""
    if snapshot.project_id != project.pk:
        raise ValidationError("The snapshot belongs to another project.")
    if snapshot.state != Snapshot.State.READY:
        raise ValidationError(f"Snapshot v{snapshot.version} is {snapshot.state}, not ready.")
    if snapshot.format != Snapshot.Format.JSONL:
        raise ValidationError(
            f"Snapshot v{snapshot.version} is {snapshot.get_format_display()}; training needs "
            "a JSON-lines snapshot."
        )
    if "train" not in snapshot.splits:
        raise ValidationError(f"Snapshot v{snapshot.version} has no train split.")
    config = run_spec(model_name=model_name, preset=preset, overrides=overrides)
    with transaction.atomic():
        run = TrainingRun.objects.create(
            project=project,
            model_name=model_name,
            config=config,
            overrides=list(overrides),
            snapshot=snapshot,
            created_by=created_by,
        )
        if enqueue:
            run.job = job_enqueue(
                kind="training_run",
                params={"run_id": run.pk},
                project=project,
                created_by=created_by,
                label=f"Train {model_name} on snapshot v{snapshot.version} (run #{run.pk})",
            )
            run.save(update_fields=["job"])
    return run


def run_resume(*, run: TrainingRun, user: Any) -> TrainingRun:
    """Queues a cancelled or failed run again; training continues from its last checkpoint."""
    if run.state not in (TrainingRun.State.CANCELLED, TrainingRun.State.FAILED):
        raise ValidationError(f"Run #{run.pk} is {run.state}; only a stopped run resumes.")
    with transaction.atomic():
        run.state = TrainingRun.State.QUEUED
        run.error = ""
        run.job = job_enqueue(
            kind="training_run",
            params={"run_id": run.pk, "resume": True},
            project=run.project,
            created_by=user,
            label=f"Resume run #{run.pk} ({run.model_name})",
        )
        run.save(update_fields=["state", "error", "job"])
    return run


def run_promote(*, run: TrainingRun) -> TrainingRun:
    """Makes this run the project's suggesting model (one per project)."""
    if run.state != TrainingRun.State.SUCCEEDED:
        raise ValidationError(f"Run #{run.pk} is {run.state}; only a finished run is promoted.")
    with transaction.atomic():
        TrainingRun.objects.filter(project=run.project, promoted_at__isnull=False).exclude(
            pk=run.pk
        ).update(promoted_at=None)
        run.promoted_at = timezone.now()
        run.save(update_fields=["promoted_at"])
    return run


# Training ------------------------------------------------------------------------------


class _RunRecorder:
    """Trainer callbacks that keep the run row and the job's progress current."""

    def __init__(self, run: TrainingRun, progress: ProgressFn, flush_seconds: float = 2.0):
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
            TrainingRun.objects.filter(pk=self.run.pk).update(
                learning_curve=self.run.learning_curve,
                history=self.run.history,
                best_score=self.run.best_score,
                steps=self.run.steps,
            )
            self.last_flush = now

    def on_start(self, _trainer: Any, info: dict[str, Any]) -> None:
        self.total = max(1, int(info["total_steps"]))
        self.progress(int(info.get("resumed_from_step") or 0), self.total, "training")

    def on_step(self, _trainer: Any, info: dict[str, Any]) -> None:
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

    def on_validation(self, _trainer: Any, info: dict[str, Any]) -> None:
        row = {k: info.get(k) for k in ("step", "epoch", "val_loss", "score")}
        self.run.learning_curve.append(row)
        if info.get("improved"):
            self.run.best_score = info.get("score")
        self.flush(force=True)

    def on_epoch_end(self, _trainer: Any, info: dict[str, Any]) -> None:
        self.run.history.append(dict(info))
        self.flush(force=True)

    def callbacks(self) -> dict[str, list[Any]]:
        return {
            "train_start": [self.on_start],
            "step": [self.on_step],
            "validation": [self.on_validation],
            "epoch_end": [self.on_epoch_end],
        }


def _batch_of(clips: Sequence[datasets.ClipCaptions], attributes: dict[int, list[int]]) -> Any:
    from modeling.ml.data import CaptionItem, collate
    from modeling.ml.vocab import BOS_ID, EOS_ID

    items = [
        CaptionItem(
            features=clip.features,  # type: ignore[arg-type]
            tokens=[BOS_ID, EOS_ID],
            clip_id=str(clip.clip_id),
            attributes=attributes.get(clip.clip_id, []),
            video=clip.video,
        )
        for clip in clips
    ]
    return collate(items)


def caption_clips_with(
    model: Any,
    vocab: Any,
    clips: Sequence[datasets.ClipCaptions],
    *,
    beam_size: int,
    attributes: dict[int, list[int]] | None = None,
    batch_size: int = 32,
    device: torch.device | None = None,
) -> list[list[Any]]:
    """Beam-search hypotheses (best first) for each clip, in order."""
    from modeling.ml.decoding import beam_search, greedy
    from modeling.ml.trainer import to_device

    device = device or next(iter(model.parameters()), torch.zeros(0)).device
    model.eval()
    out: list[list[Any]] = []
    with torch.no_grad():
        for start in range(0, len(clips), batch_size):
            batch = to_device(
                _batch_of(clips[start : start + batch_size], attributes or {}), device
            )
            if beam_size == 1:
                out.extend([hyp] for hyp in greedy(model, batch, max_length=vocab.max_length))
            else:
                out.extend(
                    beam_search(model, batch, beam_size=beam_size, max_length=vocab.max_length)
                )
    return out


def _score_split(
    model: Any,
    vocab: Any,
    data: datasets.SplitData,
    *,
    metrics: Sequence[str],
    attributes: dict[int, list[int]],
    beam_size: int = 1,
) -> Any:
    from corpus.evaluation import evaluate
    from corpus.evaluation_services import evaluation_toolkit

    hypotheses = caption_clips_with(
        model, vocab, data.clips, beam_size=beam_size, attributes=attributes
    )
    predictions = {
        str(clip.clip_id): (vocab.decode(hyps[0].tokens) if hyps else "") or "<empty>"
        for clip, hyps in zip(data.clips, hypotheses, strict=True)
    }
    # the workers' toolkit: its cache folder and its warm METEOR process
    return evaluate(
        predictions=predictions,
        references=datasets.references(data),
        metrics=metrics,
        kit=evaluation_toolkit(),
    )


def run_execute(
    *,
    run: TrainingRun,
    progress: ProgressFn = _no_progress,
    job: Job | None = None,
    resume: bool = False,
    work_dir: Path | None = None,
) -> TrainingRun:
    """Trains the run (or continues it from its last checkpoint with `resume`).

    Under torchrun (`run_execute_torchrun`) every rank calls this with the same `work_dir`,
    which the launcher made (holding `last.pt` to resume from) and removes: all ranks prepare
    the data and train; rank 0 alone updates the run row and reports progress, then scores
    and stores the checkpoint while the others return."""
    from modeling.ml import distributed
    from modeling.ml.checkpoint import load_checkpoint
    from modeling.ml.trainer import pick_device, train

    main = distributed.world_from_env().is_main
    run_config, feature_config = _configs(run)
    if main:
        TrainingRun.objects.filter(pk=run.pk).update(
            state=TrainingRun.State.RUNNING, started_at=run.started_at or timezone.now(), error=""
        )
    else:
        progress = _no_progress
    started = time.perf_counter()
    work = work_dir or Path(tempfile.mkdtemp(prefix=f"earmark-run-{run.pk}-"))
    try:
        progress(0, 1, "reading the snapshot")
        splits = datasets.snapshot_splits(run.snapshot)
        dropped = datasets.attach_features(splits, feature_config, progress=progress)
        video_config = _video_config(run)
        video_counts = (
            datasets.attach_video(splits, video_config, progress=progress)
            if video_config is not None
            else {}
        )
        train_data = splits.get("train", datasets.SplitData())
        vocab = datasets.build_vocabulary(
            train_data,
            min_count=run_config.vocab.min_count,
            max_length=run_config.vocab.max_length,
        )
        attributes: dict[int, list[int]] = {}
        phrases: dict[int, list[str]] | None = None
        if getattr(run_config.model, "aligned_attention", False):
            phrases = datasets.attribute_words(
                splits,
                source=getattr(run_config.model, "attribute_source", "retrieval"),
                names=datasets.label_names(splits),
            )
            attributes = {
                cid: vocab.encode_words(words, limit=16) for cid, words in phrases.items()
            }
        if isinstance(run_config.model, MAACConfig):
            keywords, _ = datasets.keyword_targets(train_data, size=run_config.model.num_keywords)
            # the corpus may have fewer keywords than asked for
            model = dataclasses.replace(
                run_config.model,
                num_keywords=len(keywords),
                top_k=min(run_config.model.top_k, len(keywords)),
            )
            run_config = dataclasses.replace(run_config, model=model)
        train_items = datasets.caption_items(train_data, vocab, attributes=phrases)
        val_data = splits.get("val") or splits.get("test")
        val_items = (
            datasets.caption_items(val_data, vocab, attributes=phrases)
            if val_data and val_data.clips
            else None
        )

        def score_fn(model: Any) -> float:
            scored = _score_split(
                model, vocab, val_data, metrics=VALIDATION_METRICS, attributes=attributes
            )
            return float(scored.scores["CIDEr-D"] or 0.0)

        def cancelled() -> bool:
            return job is not None and Job.objects.filter(pk=job.pk, cancel_requested=True).exists()

        recorder = _RunRecorder(run, progress)
        if not resume:
            run.learning_curve, run.history = [], []
        resume_from = None
        if resume:
            last = work / "last.pt"
            if work_dir is not None:  # the launcher copied it for every rank
                resume_from = last if last.is_file() else None
            elif run.checkpoint and _copy_from_storage(run.checkpoint, last):
                resume_from = last
        device = pick_device(run_config.train.device)
        if main:
            TrainingRun.objects.filter(pk=run.pk).update(device=_device_text(device))
        result = train(
            run=run_config,
            vocab=vocab,
            train_items=train_items,
            out_dir=work,
            val_items=val_items,
            score_fn=score_fn if val_data and val_data.clips else None,
            callbacks=recorder.callbacks(),
            cancel=cancelled,
            feature_config=feature_config,
            resume_from=resume_from,
            reward_fn=cider_reward(train_data, vocab) if run_config.train.scst_epochs else None,
        )
        if not main:
            return run
        recorder.flush(force=True)
        best = result.best_checkpoint or result.last_checkpoint
        checkpoint = load_checkpoint(best, map_location=device)
        model = checkpoint.model.to(device)
        model.prepare(train_items)
        metrics: dict[str, Any] = {}
        unavailable: dict[str, str] = {}
        if result.stopped != "cancelled":
            for split in ("val", "test"):
                data = splits.get(split)
                if data is None or not data.clips:
                    continue
                progress(1, 1, f"scoring {split}")
                scored = _score_split(
                    model, vocab, data, metrics=FINAL_METRICS, attributes=attributes, beam_size=3
                )
                metrics[split] = scored.scores
                unavailable.update(scored.unavailable)
        state = (
            TrainingRun.State.CANCELLED
            if result.stopped == "cancelled"
            else TrainingRun.State.SUCCEEDED
        )
        # a cancelled run keeps its last checkpoint, so it can resume
        keep = result.last_checkpoint if state == TrainingRun.State.CANCELLED else best
        with transaction.atomic():
            locked = TrainingRun.objects.select_for_update().get(pk=run.pk)
            with Path(keep).open("rb") as handle:
                locked.checkpoint.save(f"run-{run.pk}.pt", File(handle), save=False)
            locked.state = state
            locked.metrics = metrics
            locked.metrics_unavailable = unavailable
            locked.stopped = result.stopped
            locked.steps = result.steps
            locked.best_score = result.best_score
            locked.learning_curve = run.learning_curve
            locked.history = run.history
            locked.code_version = checkpoint.code_version
            locked.duration_seconds = (run.duration_seconds or 0) + time.perf_counter() - started
            locked.finished_at = timezone.now()
            locked.save()
        locked.dropped_clips = dropped  # type: ignore[attr-defined]
        locked.video_counts = video_counts  # type: ignore[attr-defined]
        return locked
    except Exception as exc:
        TrainingRun.objects.filter(pk=run.pk).update(
            state=TrainingRun.State.FAILED,
            error=str(exc) or type(exc).__name__,
            finished_at=timezone.now(),
            duration_seconds=(run.duration_seconds or 0) + time.perf_counter() - started,
        )
        raise
    finally:
        if work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def cider_reward(data: datasets.SplitData, vocab: Any) -> Callable[..., list[float]]:
    """The self-critical reward: CIDEr-D of each sampled caption against its clip's
    references in `data`, with document frequencies over all of them (modeling.ml.cider,
    pycocoevalcap's formula on the vocabulary's lower-cased, punctuation-free words)."""
    from modeling.ml.cider import CiderD
    from modeling.ml.vocab import tokenize

    scorer = CiderD({str(c.clip_id): [tokenize(t) for t in c.texts] for c in data.clips})

    def reward(captions: list[list[int]], clip_ids: list[str]) -> list[float]:
        return scorer.scores([vocab.decode(words).split() for words in captions], clip_ids)

    return reward


def _device_text(device: torch.device) -> str:
    from modeling.ml.distributed import world_from_env

    size = world_from_env().size
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"{size} x cuda ({name}, DDP)" if size > 1 else f"{device} ({name})"
    text = f"cpu ({torch.get_num_threads()} threads)"
    return f"{size} x {text}, DDP" if size > 1 else text


def training_processes() -> int:
    """How many processes train a run on this worker: settings.TRAIN_NPROC, or with 0 one
    per visible GPU (1 without CUDA)."""
    if settings.TRAIN_NPROC:
        return int(settings.TRAIN_NPROC)
    return max(1, torch.cuda.device_count()) if torch.cuda.is_available() else 1


def _torchrun_command(
    *, nproc: int, run: TrainingRun, job: Job, work: Path, resume: bool
) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",  # torchrun, from the worker's own environment
        "--standalone",
        f"--nproc_per_node={nproc}",
        str(Path(settings.BASE_DIR) / "manage.py"),
        "train_run",
        str(run.pk),
        "--job",
        str(job.pk),
        "--work-dir",
        str(work),
    ]
    return [*command, "--resume"] if resume else command


def run_execute_torchrun(
    *, run: TrainingRun, job: Job, nproc: int, resume: bool = False
) -> TrainingRun:
    """Trains the run data-parallel in `nproc` processes (one per GPU) that torchrun starts
    with `manage.py train_run`, and waits for them. Rank 0 keeps the run row, its learning
    curve and the job's progress current and polls the job's cancel flag, as in-process
    training does; the processes share a work folder made (and removed) here."""
    work = Path(tempfile.mkdtemp(prefix=f"earmark-run-{run.pk}-"))
    try:
        if resume and run.checkpoint:
            _copy_from_storage(run.checkpoint, work / "last.pt")
        command = _torchrun_command(nproc=nproc, run=run, job=job, work=work, resume=resume)
        log.info("run %s: %s", run.pk, " ".join(command))
        done = subprocess.run(
            command, cwd=settings.BASE_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    run.refresh_from_db()
    if done.returncode != 0:
        tail = done.stdout.decode(errors="replace")[-2000:]
        if run.state not in (TrainingRun.State.FAILED, TrainingRun.State.CANCELLED):
            # a rank died without recording why (killed, out of memory)
            error = f"torchrun exited with status {done.returncode}: {tail.strip()[-500:]}"
            TrainingRun.objects.filter(pk=run.pk).update(
                state=TrainingRun.State.FAILED, error=error, finished_at=timezone.now()
            )
            run.refresh_from_db()
        log.error("run %s: torchrun exited with %s:\n%s", run.pk, done.returncode, tail)
        raise RuntimeError(run.error or f"torchrun exited with status {done.returncode}")
    return run


def _copy_from_storage(field_file: Any, target: Path) -> bool:
    try:
        with field_file.open("rb") as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    except FileNotFoundError:
        return False
    return True


def run_execute_job(*, job: Job, progress: ProgressFn, run_id: int, resume: bool = False) -> dict:
    from modeling.ml.distributed import world_from_env

    run = TrainingRun.objects.select_related("snapshot", "project").get(pk=run_id)
    if run.job_id != job.pk:
        TrainingRun.objects.filter(pk=run.pk).update(job=job)
    nproc = training_processes()
    if nproc > 1 and not world_from_env().distributed:
        finished = run_execute_torchrun(run=run, job=job, nproc=nproc, resume=resume)
    else:
        finished = run_execute(run=run, progress=progress, job=job, resume=resume)
    return {
        "run": finished.pk,
        "state": finished.state,
        "stopped": finished.stopped,
        "best_score": finished.best_score,
        "metrics": finished.metrics,
        "dropped_clips_without_audio": getattr(finished, "dropped_clips", {}),
        "video": getattr(finished, "video_counts", {}),
    }


# Suggestions ---------------------------------------------------------------------------


def clips_caption(
    *,
    run: TrainingRun,
    clip_ids: Iterable[int] | None = None,
    subset: Subset | None = None,
    beam_size: int = 3,
    progress: ProgressFn = _no_progress,
    batch_size: int = 32,
) -> dict[str, Any]:
    """Captions clips with the run's model (beam search) and stores one Suggestion per
    clip: the best hypothesis with its log-probability and mean token entropy, and the
    rest of the beam. Clips without audio are skipped and counted."""
    from modeling.ml.checkpoint import load_checkpoint
    from modeling.ml.trainer import pick_device

    if run.state != TrainingRun.State.SUCCEEDED or not run.checkpoint:
        raise ValidationError(f"Run #{run.pk} is {run.state}; it has no model to caption with.")
    if beam_size < 1 or beam_size > 10:
        raise ValidationError("The beam size is between 1 and 10.")
    clips = Clip.objects.filter(status=Clip.Status.READY).exclude(audio="")
    if subset is not None:
        clips = clips.filter(subsets=subset)
    if clip_ids is not None:
        wanted = sorted(set(clip_ids))
        known = set(Clip.objects.filter(pk__in=wanted).values_list("pk", flat=True))
        if set(wanted) - known:
            raise ValidationError(f"Unknown clip id(s): {sorted(set(wanted) - known)}.")
        clips = clips.filter(pk__in=wanted)
    rows = list(clips.order_by("pk").values_list("pk", "audio", "content_sha256"))
    run_config, feature_config = _configs(run)
    device = pick_device(run_config.train.device)
    # read in place on disk storage; a bucket's checkpoint is copied once to a temporary file
    with datasets.local_file(run.checkpoint.name) as local:
        checkpoint = load_checkpoint(local, map_location=device)
    model, vocab = checkpoint.model.to(device), checkpoint.vocab
    cache = datasets.feature_cache(feature_config)
    video_config = _video_config(run)
    video_cache = datasets.video_cache(video_config) if video_config is not None else None
    # the same video training read: the features video when fetched, else the hint
    videos = datasets.clip_video_names([r[0] for r in rows])
    stored = 0
    total = len(rows)
    progress(0, total, f"captioning {total:,} clip(s)")
    for start in range(0, total, batch_size):
        chunk = rows[start : start + batch_size]
        group = []
        for pk, audio, sha in chunk:
            with datasets.local_file(audio) as path:
                features = cache.get_or_compute(path, sha or None)
            clip = datasets.ClipCaptions(
                clip_id=pk, texts=[], labels=[], audio=audio, features=features
            )
            if video_cache is not None:
                try:
                    clip.video = datasets.clip_video(video_cache, videos.get(pk, ("", False))[0])
                except ValueError:  # an undecodable video: caption from the audio alone
                    clip.video = video_cache.empty()
            group.append(clip)
        hypotheses = caption_clips_with(model, vocab, group, beam_size=beam_size, device=device)
        now = timezone.now()
        suggestions = []
        for clip, hyps in zip(group, hypotheses, strict=True):
            if not hyps:
                continue
            best = hyps[0]
            suggestions.append(
                Suggestion(
                    run=run,
                    clip_id=clip.clip_id,
                    text=vocab.decode(best.tokens),
                    log_prob=min(0.0, best.log_prob),
                    mean_entropy=max(0.0, best.entropy),
                    hypotheses=[
                        {
                            "text": vocab.decode(h.tokens),
                            "log_prob": h.log_prob,
                            "score": h.score,
                            "entropy": h.entropy,
                        }
                        for h in hyps
                    ],
                    beam_size=beam_size,
                    created_at=now,
                )
            )
        with transaction.atomic():
            Suggestion.objects.filter(
                run=run, clip_id__in=[s.clip_id for s in suggestions]
            ).delete()
            Suggestion.objects.bulk_create(suggestions)
        stored += len(suggestions)
        progress(min(start + batch_size, total), total, f"{stored:,} suggestion(s)")
    return {"run": run.pk, "clips": total, "suggestions": stored, "beam_size": beam_size}


def clips_caption_job(
    *,
    job: Job,
    progress: ProgressFn,
    run_id: int,
    clip_ids: list[int] | None = None,
    subset_id: int | None = None,
    beam_size: int = 3,
) -> dict[str, Any]:
    run = TrainingRun.objects.get(pk=run_id)
    subset = Subset.objects.get(pk=subset_id, project=run.project) if subset_id else None
    return clips_caption(
        run=run, clip_ids=clip_ids, subset=subset, beam_size=beam_size, progress=progress
    )


def model_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(registry.MODELS)]


def preset_names(model_name: str) -> list[str]:
    from modeling.ml.config import MODEL_PRESETS

    return sorted(MODEL_PRESETS.get(model_name, {}))
