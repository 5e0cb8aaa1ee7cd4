"""Training a run: the Django side of modeling.ml's trainer, on the gpu workers.

`run_execute` (the job `run_execute_job`, or under torchrun one process per GPU) reads the
run's data (`modeling.datasets.prepare_run_data`), trains with modeling.ml.trainer, scores
the val and test splits with corpus.evaluation (`modeling.scoring`) and stores the
checkpoint. What a run trains is decided when it is recorded (`modeling.planning`,
`modeling.services.run_start`); captioning clips with a finished run is
`modeling.suggestions`. This module loads torch: only the workers that train import it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import Error, transaction
from django.utils import timezone

from core.models import Job
from core.progress import ProgressFn, no_progress
from core.reconnect import with_reconnect
from core.services import JobCancelled, JobLost
from modeling import datasets
from modeling.models import TrainingRun
from modeling.run_recorder import RunRecorder
from modeling.scoring import FINAL_METRICS, score_split, validation_metrics
from modeling.signals import run_succeeded

if TYPE_CHECKING:
    from modeling.ml.data import CaptionItem
    from modeling.ml.models.base import Captioner
    from modeling.ml.train_state import TrainResult
    from modeling.ml.vocab import Vocabulary

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    """What `run_execute` did: the run as stored at the end, and what its data left out."""

    run: TrainingRun
    dropped_clips: dict[str, int]  # clips without audio per split (see prepare_run_data)
    video_counts: dict[str, int]  # clips with, without and with unreadable video
    warnings: list[str]  # clips left out because their audio could not be read


def run_execute(
    *,
    run: TrainingRun,
    progress: ProgressFn = no_progress,
    job: Job | None = None,
    resume: bool = False,
    work_dir: Path | None = None,
) -> RunOutcome:
    """Trains the run (or continues it from its last stored checkpoint with `resume`).

    The run follows `job`: it becomes the run's job, a cancel request stops training
    cleanly (the run is cancelled, keeps its checkpoint and can resume), and once the job
    is no longer held by this execution (swept, taken over) nothing here writes the run.
    The checkpoint goes to storage after every epoch and every TRAIN_CHECKPOINT_MINUTES.

    Under torchrun (`run_execute_torchrun`) every rank calls this with the same `work_dir`,
    which the launcher made (holding `last.pt` to resume from) and removes: all ranks prepare
    the data and train; rank 0 alone updates the run row and reports progress, then scores
    and stores the checkpoint while the others return."""
    from modeling.ml import distributed

    main = distributed.world_from_env().is_main
    if main:
        if job is not None and run.job_id != job.pk:
            TrainingRun.objects.filter(pk=run.pk).update(job=job)
            run.job = job
        TrainingRun.objects.filter(pk=run.pk).update(
            state=TrainingRun.State.RUNNING, started_at=run.started_at or timezone.now(), error=""
        )
        _remove_orphan_checkpoints(run)
        _remove_stale_work_dirs(run)
    else:
        progress = no_progress
    started = time.perf_counter()
    work = work_dir or Path(tempfile.mkdtemp(prefix=_work_prefix(run, os.getpid())))
    try:
        data = datasets.prepare_run_data(run, progress=progress)
        if main:
            # recorded before training, so a run that fails later still shows them
            TrainingRun.objects.filter(pk=run.pk).update(warnings=data.warnings)
            run.warnings = data.warnings
        quiet = _cancel_by_trainer(progress)
        trained = _train(
            run, data, progress=quiet, job=job, resume=resume, work=work, launched=work_dir
        )
        if main:
            run = _store_result(run, data, trained, progress=quiet, started=started, job=job)
        return RunOutcome(
            run=run,
            dropped_clips=data.dropped_clips,
            video_counts=data.video_counts,
            warnings=data.warnings,
        )
    except JobLost:
        raise  # the run belongs to another execution now: leave it alone
    except Exception as exc:
        # cancelled before training began (while the data was prepared): nothing to keep
        cancelled = isinstance(exc, JobCancelled)
        try:
            if _holds(run, job):
                TrainingRun.objects.filter(pk=run.pk).update(
                    state=TrainingRun.State.CANCELLED if cancelled else TrainingRun.State.FAILED,
                    error="" if cancelled else (str(exc) or type(exc).__name__),
                    finished_at=timezone.now(),
                    duration_seconds=(run.duration_seconds or 0) + time.perf_counter() - started,
                )
        except Error:  # the database went away too: the run follows its job later
            log.exception("run %s: could not record how it ended", run.pk)
        raise
    finally:
        if work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def _cancel_by_trainer(progress: ProgressFn) -> ProgressFn:
    """The job's progress reporter minus its cancel exception, for the training loop: the
    trainer polls the job's cancel flag at every batch and stops cleanly (the last
    checkpoint kept, the run cancelled), where the exception from a progress report would
    have failed the run mid-step and dropped its checkpoint."""

    def report(done: int, total: int | None = None, message: str = "") -> None:
        with contextlib.suppress(JobCancelled):
            progress(done, total, message)

    return report


def _cancel_requested(job: Job) -> bool:
    """Polled at every batch and while scoring; a dropped connection is retried."""
    return with_reconnect(
        lambda: Job.objects.filter(pk=job.pk, cancel_requested=True).exists(),
        what=f"checking job #{job.pk} for a cancel",
    )


def _holds(run: TrainingRun, job: Job | None) -> bool:
    """Whether this execution still owns the run: it trains for the run's current job, and
    that job is still held by the execution this process started (not swept, failed or
    taken over). Without a job (a command, a test) the run is always its own."""
    if job is None:
        return True
    if TrainingRun.objects.filter(pk=run.pk).exclude(job=job).exists():
        return False  # resumed meanwhile under another job
    return (
        Job.objects.filter(pk=job.pk, execution=job.execution)
        .exclude(state__in=Job.FINISHED_STATES)
        .exists()
    )


# Checkpoints in storage ----------------------------------------------------------------
#
# A run's checkpoint is replaced atomically: the new file is uploaded under a name of its
# own, then the run row is switched to it in one update, then the old file is deleted. A
# reader (resume, the run page, suggestions) always finds a complete file; a crash between
# upload and switch leaves an orphan `run-<id>-*.pt`, removed when the run trains again.


def _checkpoint_prefix(run: TrainingRun) -> str:
    return f"run-{run.pk}-"


def _upload_checkpoint(run: TrainingRun, path: Path) -> str:
    field = run.checkpoint.field
    name = field.generate_filename(run, f"{_checkpoint_prefix(run)}{uuid.uuid4().hex[:12]}.pt")
    with path.open("rb") as handle:
        return field.storage.save(name, File(handle))


def _delete_replaced(run: TrainingRun, old: str, new: str) -> None:
    if old and old != new:
        storage = run.checkpoint.storage
        transaction.on_commit(lambda: storage.delete(old), robust=True)


def _store_checkpoint(run: TrainingRun, path: Path, *, job: Job | None) -> None:
    """Makes `path` the run's stored checkpoint (see above); raises JobLost, storing nothing,
    when this execution no longer owns the run."""
    name = _upload_checkpoint(run, path)

    def switch() -> None:
        with transaction.atomic():
            locked = TrainingRun.objects.select_for_update().get(pk=run.pk)
            if not _holds(locked, job):
                run.checkpoint.storage.delete(name)
                raise JobLost(f"Run #{run.pk} belongs to another execution now.")
            old = locked.checkpoint.name
            TrainingRun.objects.filter(pk=run.pk).update(checkpoint=name)
            _delete_replaced(run, old, name)

    with_reconnect(switch, what=f"storing run #{run.pk}'s checkpoint")
    run.checkpoint.name = name


def _remove_orphan_checkpoints(run: TrainingRun) -> None:
    """Files of this run left in storage by a crash between upload and switch."""
    field = run.checkpoint.field
    folder = os.path.dirname(field.generate_filename(run, "x.pt"))
    current = TrainingRun.objects.filter(pk=run.pk).values_list("checkpoint", flat=True).get()
    try:
        _, files = field.storage.listdir(folder)
    except (FileNotFoundError, NotImplementedError):
        return
    for file_name in files:
        name = f"{folder}/{file_name}" if folder else file_name
        if file_name.startswith(_checkpoint_prefix(run)) and name != current:
            field.storage.delete(name)


class _CheckpointStore:
    """Trainer callback: each "last" checkpoint written during training (after every epoch,
    and within long epochs every TRAIN_CHECKPOINT_MINUTES) is stored as the run's, so a
    crash loses at most that much and resume continues from it. The final one is stored with
    the run's result instead (`_store_result`)."""

    def __init__(self, run: TrainingRun, job: Job | None) -> None:
        self.run, self.job = run, job

    def __call__(self, _trainer: Any, info: dict[str, Any]) -> None:
        if info["kind"] == "last" and not info.get("final"):
            _store_checkpoint(self.run, Path(info["path"]), job=self.job)


def _work_prefix(run: TrainingRun, pid: int) -> str:
    return f"earmark-run-{run.pk}-pid{pid}-"


def _remove_stale_work_dirs(run: TrainingRun) -> None:
    """Work folders of this run whose process is gone (killed mid-training: its `finally`
    never ran), so a crashed run does not leave its data and checkpoints in the temp dir."""
    prefix = f"earmark-run-{run.pk}-pid"
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        pid = folder.name.removeprefix(prefix).split("-", 1)[0]
        if pid.isdigit() and not _process_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class _Trained:
    result: TrainResult
    vocab: Vocabulary
    train_items: list[CaptionItem]
    attributes: dict[int, list[int]]  # attribute word ids per clip id


def _train(
    run: TrainingRun,
    data: datasets.RunData,
    *,
    progress: ProgressFn,
    job: Job | None,
    resume: bool,
    work: Path,
    launched: Path | None,
) -> _Trained:
    """Trains on the run's data in `work` (`launched`: the folder torchrun's launcher made)."""
    from modeling.ml import distributed
    from modeling.ml.runtime import pick_device
    from modeling.ml.scst import cider_reward
    from modeling.ml.trainer import train

    vocab = data.build_vocabulary()
    phrases = data.attribute_phrases()
    attributes = datasets.attribute_ids(phrases, vocab)
    run_config = data.with_keyword_targets()
    train_data, val_data = data.train, data.val
    train_items = datasets.caption_items(train_data, vocab, attributes=phrases)
    validating = val_data is not None and bool(val_data.clips)
    val_items = (
        datasets.caption_items(val_data, vocab, attributes=phrases)
        if val_data is not None and validating
        else None
    )

    # a recipe may watch another validation figure for plateaus (the BiLSTM's BLEU-4)
    plateau_metric = run_config.train.plateau_metric
    metrics = validation_metrics(plateau_metric)

    def score_fn(model: Captioner) -> float | dict[str, float]:
        assert val_data is not None
        scored = score_split(model, vocab, val_data, metrics=metrics, attributes=attributes)
        score = float(scored.scores["CIDEr-D"] or 0.0)
        if not plateau_metric:
            return score
        return {"score": score, plateau_metric: float(scored.scores[plateau_metric] or 0.0)}

    def cancelled() -> bool:
        return job is not None and _cancel_requested(job)

    recorder = RunRecorder(run, progress)
    callbacks = recorder.callbacks()
    callbacks["checkpoint"] = [_CheckpointStore(run, job)]
    if not resume:
        run.learning_curve, run.history = [], []
    resume_from = None
    if resume:
        last = work / "last.pt"
        if launched is not None:  # the launcher copied it for every rank
            resume_from = last if last.is_file() else None
        elif run.checkpoint and datasets.copy_from_storage(run.checkpoint, last):
            resume_from = last
    # a run started from another's checkpoint takes its weights, until it has its own
    start_weights = None
    if resume_from is None and run.started_from_id is not None:
        start = work / START_WEIGHTS
        if launched is None:
            _copy_start_weights(run, start)
        start_weights = start
    device = pick_device(run_config.train.device)
    if distributed.world_from_env().is_main:
        TrainingRun.objects.filter(pk=run.pk).update(device=_device_text(device))
    result = train(
        run=run_config,
        vocab=vocab,
        train_items=train_items,
        out_dir=work,
        val_items=val_items,
        score_fn=score_fn if validating else None,
        callbacks=callbacks,
        cancel=cancelled,
        feature_config=data.feature_config,
        resume_from=resume_from,
        reward_fn=(
            cider_reward(datasets.references(train_data), vocab)
            if run_config.train.scst_epochs
            else None
        ),
        checkpoint_every_seconds=60 * settings.TRAIN_CHECKPOINT_MINUTES or None,
        start_weights=start_weights,
    )
    if distributed.world_from_env().is_main:
        recorder.flush(force=True)
    return _Trained(result=result, vocab=vocab, train_items=train_items, attributes=attributes)


START_WEIGHTS = "start.pt"  # in a run's work folder: the checkpoint it starts from


def _copy_start_weights(run: TrainingRun, target: Path) -> None:
    """The checkpoint of the run `run` starts from (`run_start_from`), copied to `target`."""
    source = TrainingRun.objects.get(continued_by=run)
    if not (source.checkpoint and datasets.copy_from_storage(source.checkpoint, target)):
        raise ValidationError(
            f"Run #{source.pk}'s checkpoint, which run #{run.pk} starts from, is missing "
            "from storage."
        )


def _store_result(
    run: TrainingRun,
    data: datasets.RunData,
    trained: _Trained,
    *,
    progress: ProgressFn,
    started: float,
    job: Job | None = None,
) -> TrainingRun:
    """Scores the best checkpoint on val and test (unless cancelled) and stores it, the
    scores and the training record in the run row, while this execution owns the run.

    Scoring (beam search and the metrics over two splits) can take long, and the trainer no
    longer polls the job: a cancel requested before or while scoring stops it before the
    next split, or drops the scores when it came during the last, and the run ends
    cancelled like one cancelled while training, keeping its last checkpoint. Resumed, it
    has nothing left to train (an early-stopped run one more epoch) and is scored with
    those last weights."""
    from modeling.ml.checkpoint import load_checkpoint
    from modeling.ml.runtime import pick_device

    result, vocab = trained.result, trained.vocab
    device = pick_device(data.run_config.train.device)
    best = result.best_checkpoint or result.last_checkpoint
    checkpoint = load_checkpoint(best, map_location=device)
    model = checkpoint.model.to(device)
    model.prepare(trained.train_items)
    metrics: dict[str, Any] = {}
    unavailable: dict[str, str] = {}

    def cancel_requested() -> bool:
        return job is not None and _cancel_requested(job)

    cancelled = result.stopped == "cancelled"
    for split in ("val", "test"):
        scored_data = data.splits.get(split)
        if scored_data is None or not scored_data.clips:
            continue
        cancelled = cancelled or cancel_requested()
        if cancelled:
            break
        progress(1, 1, f"scoring {split}")
        scored = score_split(
            model,
            vocab,
            scored_data,
            metrics=FINAL_METRICS,
            attributes=trained.attributes,
            beam_size=data.run_config.decoding.beam_size,
            length_penalty=data.run_config.decoding.length_penalty,
        )
        metrics[split] = scored.scores
        unavailable.update(scored.unavailable)
    cancelled = cancelled or cancel_requested()
    if cancelled:
        metrics, unavailable = {}, {}
    state = TrainingRun.State.CANCELLED if cancelled else TrainingRun.State.SUCCEEDED
    # a cancelled run keeps its last checkpoint, so it can resume
    keep = result.last_checkpoint if state == TrainingRun.State.CANCELLED else best
    stored = _upload_checkpoint(run, Path(keep))

    def record() -> TrainingRun:
        with transaction.atomic():
            locked = TrainingRun.objects.select_for_update().get(pk=run.pk)
            if not _holds(locked, job):
                run.checkpoint.storage.delete(stored)
                raise JobLost(f"Run #{run.pk} belongs to another execution now.")
            _delete_replaced(run, locked.checkpoint.name, stored)
            locked.checkpoint.name = stored
            locked.state = state
            locked.metrics = metrics
            locked.metrics_unavailable = unavailable
            locked.stopped = "cancelled" if cancelled else result.stopped
            locked.steps = result.steps
            locked.best_score = result.best_score
            locked.learning_curve = run.learning_curve
            locked.history = run.history
            locked.code_version = checkpoint.code_version
            locked.duration_seconds = (run.duration_seconds or 0) + time.perf_counter() - started
            locked.finished_at = timezone.now()
            locked.save()
        return locked

    return with_reconnect(record, what=f"recording run #{run.pk}'s result")


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
        # `python -m django` rather than a manage.py path: an installed copy has no manage.py.
        "--module",
        "django",
        "train_run",
        str(run.pk),
        "--job",
        str(job.pk),
        "--work-dir",
        str(work),
    ]
    return [*command, "--resume"] if resume else command


def _torchrun_environment() -> dict[str, str]:
    """The worker's environment, plus what the ranks need to load the same settings: the
    settings module and the folder holding the embedded database and media."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "earmark.settings"),
        "EARMARK_VAR_DIR": str(settings.VAR_DIR),
    }


def run_execute_torchrun(
    *, run: TrainingRun, job: Job, nproc: int, resume: bool = False
) -> RunOutcome:
    """Trains the run data-parallel in `nproc` processes (one per GPU) that torchrun starts
    with `python -m django train_run`, and waits for them. Rank 0 keeps the run row, its learning
    curve and the job's progress current and polls the job's cancel flag, as in-process
    training does; the processes share a work folder made (and removed) here."""
    work = Path(tempfile.mkdtemp(prefix=_work_prefix(run, os.getpid())))
    try:
        if resume and run.checkpoint:
            datasets.copy_from_storage(run.checkpoint, work / "last.pt")
        if run.started_from_id is not None:
            _copy_start_weights(run, work / START_WEIGHTS)
        command = _torchrun_command(nproc=nproc, run=run, job=job, work=work, resume=resume)
        log.info("run %s: %s", run.pk, " ".join(command))
        done = subprocess.run(
            command,
            cwd=settings.BASE_DIR,
            env=_torchrun_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
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
    # what the data left out stays in rank 0's process, apart from the run's warnings
    return RunOutcome(run=run, dropped_clips={}, video_counts={}, warnings=run.warnings)


def run_execute_job(
    *, job: Job, progress: ProgressFn, run_id: int, resume: bool = False
) -> dict[str, Any]:
    from modeling.ml.distributed import world_from_env

    run = TrainingRun.objects.select_related("snapshot", "project").get(pk=run_id)
    if run.job_id != job.pk:
        TrainingRun.objects.filter(pk=run.pk).update(job=job)
    nproc = training_processes()
    if nproc > 1 and not world_from_env().distributed:
        outcome = run_execute_torchrun(run=run, job=job, nproc=nproc, resume=resume)
    else:
        outcome = run_execute(run=run, progress=progress, job=job, resume=resume)
    finished = outcome.run
    if finished.state == TrainingRun.State.CANCELLED:
        # the job ends cancelled too (not succeeded); the run keeps its checkpoint
        raise JobCancelled("Cancelled on request.")
    if finished.state == TrainingRun.State.SUCCEEDED:
        run_succeeded.send(sender=TrainingRun, run=finished)
    return {
        "run": finished.pk,
        "state": finished.state,
        "stopped": finished.stopped,
        "best_score": finished.best_score,
        "metrics": finished.metrics,
        "dropped_clips_without_audio": outcome.dropped_clips,
        "video": outcome.video_counts,
        "warnings": outcome.warnings,
    }
