"""Failure 6: training runs. A run follows its job (a lost job fails its run, which can then
resume); its checkpoint reaches storage after every epoch, atomically (one stored file per
run); a cancel is a clean stop that keeps the checkpoint and cancels the job; and a run
killed mid-training resumes from its last stored checkpoint, not from step 0."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from active.models import CurvePoint, PromotionDecision, Retrain
from core.models import Job, Project
from core.services import JobCancelled, job_cancel, job_create, job_run, jobs_fail_lost
from core.tasks import run_job
from corpus.models import Snapshot
from curation.models import Subset
from modeling import services, training
from modeling.ml.checkpoint import read_checkpoint
from modeling.ml.trainer import Trainer
from modeling.models import TrainingRun
from modeling.run_recorder import RunRecorder
from modeling.scoring import FINAL_METRICS
from tests.modeling.captioning import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.modeling.factories import (
    TINY_RUN,
    jsonl_snapshot,
    media_root_fixture,  # noqa: F401 (fixture)
    scenes_fixture,  # noqa: F401 (fixture)
    start_tiny_run,
)
from tests.reliability import processes
from tests.reliability.kinds import postgresql_only, terminate_own_connection
from tests.reliability.processes import LEASE_SECONDS


@pytest.fixture
def snapshot(project: Project, scenes: Subset) -> Snapshot:
    """Train and val only: the runs here are not scored on a test split."""
    return jsonl_snapshot(project, splits=["train", "val"])


@pytest.fixture
def no_broker(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Jobs these tests queue are run here, by hand; their messages go nowhere."""
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(run_job, "apply_async", lambda **kwargs: sent.append(kwargs["args"]))
    return sent


def _run_with_job(project: Project, snapshot: Snapshot, epochs: int) -> TrainingRun:
    run = start_tiny_run(project, snapshot, "lstm", [*TINY_RUN, f"train.epochs={epochs}"])
    run.job = job_create(kind="training_run", params={"run_id": run.pk}, project=project)
    run.save(update_fields=["job"])
    return run


def _stored(run: TrainingRun, media_root: Path) -> list[str]:
    folder = media_root / "checkpoints"
    return sorted(p.name for p in folder.glob(f"run-{run.pk}-*")) if folder.is_dir() else []


# The run follows its job --------------------------------------------------------------


@pytest.mark.django_db
def test_a_run_whose_job_was_lost_fails_with_it_and_can_resume(
    project: Project, snapshot: Snapshot, no_broker: list[tuple[Any, ...]]
) -> None:
    run = _run_with_job(project, snapshot, epochs=1)
    assert run.job is not None
    Job.objects.filter(pk=run.job.pk).update(
        state=Job.State.RUNNING,
        worker="gpu@dead",
        execution="gone",
        runner_pid=4242,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    TrainingRun.objects.filter(pk=run.pk).update(state=TrainingRun.State.RUNNING)

    assert jobs_fail_lost() == 1

    run.refresh_from_db()
    assert run.state == TrainingRun.State.FAILED
    assert (
        run.error == "Worker gpu@dead (pid 4242) stopped renewing its lease while running this job."
    )
    resumed = services.run_resume(run=run, user=None)
    assert resumed.state == TrainingRun.State.QUEUED


@pytest.mark.django_db
def test_a_retrain_whose_worker_died_still_promotes_if_better_once_its_run_resumes(
    project: Project, snapshot: Snapshot, no_broker: list[tuple[Any, ...]]
) -> None:
    run = start_tiny_run(project, snapshot, "lstm", [*TINY_RUN, "train.epochs=1"])
    retrain = Retrain.objects.create(
        project=project,
        trigger=Retrain.Trigger.MANUAL,
        reason="test",
        approved_captions=16,
        snapshot=snapshot,
        run=run,
    )
    retrain.job = job_create(kind="active_retrain", params={"retrain_id": retrain.pk})
    retrain.save(update_fields=["job"])
    TrainingRun.objects.filter(pk=run.pk).update(job=retrain.job, state=TrainingRun.State.RUNNING)
    Job.objects.filter(pk=retrain.job.pk).update(  # the gpu worker died mid-training
        state=Job.State.RUNNING,
        worker="gpu@dead",
        execution="gone",
        runner_pid=4242,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert jobs_fail_lost() == 1
    run.refresh_from_db()
    assert run.state == TrainingRun.State.FAILED

    resumed = services.run_resume(run=run, user=None)
    assert resumed.job is not None
    job = job_run(job_id=resumed.job.pk)

    run.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert run.state == TrainingRun.State.SUCCEEDED
    decision = PromotionDecision.objects.get(retrain=retrain)
    assert decision.run == run
    assert decision.promoted  # no run suggested before
    assert decision.run_score is not None
    assert CurvePoint.objects.get(project=project, source=CurvePoint.Source.LIVE).run == run


@pytest.mark.django_db
def test_a_run_of_no_retrain_is_not_promoted_when_it_succeeds(
    project: Project, snapshot: Snapshot
) -> None:
    run = _run_with_job(project, snapshot, epochs=1)
    assert run.job is not None

    job_run(job_id=run.job.pk)

    run.refresh_from_db()
    assert run.state == TrainingRun.State.SUCCEEDED
    assert not PromotionDecision.objects.exists()
    assert run.promoted_at is None


@pytest.mark.django_db
def test_cancelling_a_queued_runs_job_cancels_the_run(project: Project, snapshot: Snapshot) -> None:
    run = _run_with_job(project, snapshot, epochs=1)
    assert run.job is not None

    job_cancel(job=run.job)

    run.refresh_from_db()
    assert run.state == TrainingRun.State.CANCELLED


# A dropped database connection mid-epoch ------------------------------------------------


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_run_whose_connection_is_terminated_mid_epoch_finishes_without_a_resume(
    project: Project,
    snapshot: Snapshot,
    media_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    resumed_from: list[int],
) -> None:
    run = _run_with_job(project, snapshot, epochs=2)
    assert run.job is not None
    cut_at: list[int] = []
    on_step = RunRecorder.on_step

    def cut_then_record(recorder: RunRecorder, trainer: Trainer, info: dict[str, Any]) -> None:
        if not cut_at and info["step"] == 2:  # the first epoch has more steps to come
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                cut_at.append(cursor.fetchone()[0])
            terminate_own_connection()
        on_step(recorder, trainer, info)

    monkeypatch.setattr(RunRecorder, "on_step", cut_then_record)

    job = job_run(job_id=run.job.pk)

    run.refresh_from_db()
    assert cut_at
    assert run.history[0]["step"] > 2  # cut mid-epoch
    assert job.state == Job.State.SUCCEEDED, job.error
    assert run.state == TrainingRun.State.SUCCEEDED, run.error
    assert job.attempts == 1  # the same execution finished it
    assert run.job_id == job.pk
    assert resumed_from == []
    assert [row["epoch"] for row in run.history] == [1, 2]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != cut_at[0]  # it reconnected


# Checkpoints in storage, cancel ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_checkpoint_is_stored_after_every_epoch_replacing_the_last_one(
    project: Project, snapshot: Snapshot, media_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored_steps: list[int] = []
    store = training._store_checkpoint

    def spy(run: TrainingRun, path: Path, *, job: Job | None) -> None:
        store(run, path, job=job)
        stored_steps.append(read_checkpoint(media_root / run.checkpoint.name)["step"])

    monkeypatch.setattr(training, "_store_checkpoint", spy)
    run = _run_with_job(project, snapshot, epochs=3)
    assert run.job is not None

    job = job_run(job_id=run.job.pk)

    run.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert run.state == TrainingRun.State.SUCCEEDED
    # stored as each epoch ended
    assert stored_steps == [row["step"] for row in run.history]
    assert len(stored_steps) == 3
    assert _stored(run, media_root) == [Path(run.checkpoint.name).name]  # the replaced are gone


@pytest.mark.django_db
def test_a_cancel_surfacing_in_a_progress_report_stops_cleanly_and_keeps_the_checkpoint(
    project: Project, snapshot: Snapshot
) -> None:
    """With log_every_steps=1 each step reports progress, and a cancel request surfaces
    there as JobCancelled; it must not fail the run and drop its checkpoint."""
    run = _run_with_job(project, snapshot, epochs=3)
    job = run.job
    assert job is not None
    steps: list[int] = []

    def report(done: int, total: int | None = None, message: str = "") -> None:
        if message.startswith("epoch"):  # a step's report
            steps.append(done)
            if len(steps) == 3:  # someone presses Cancel at the third step
                Job.objects.filter(pk=job.pk).update(cancel_requested=True)
            if len(steps) >= 3:
                raise JobCancelled("Cancelled on request.")

    cancelled = training.run_execute(run=run, job=job, progress=report).run

    assert cancelled.state == TrainingRun.State.CANCELLED, cancelled.error
    assert cancelled.stopped == "cancelled"
    assert cancelled.checkpoint
    assert read_checkpoint(cancelled.checkpoint.path)["step"] == 3


@pytest.mark.django_db
def test_a_cancelled_runs_job_ends_cancelled_not_succeeded(
    project: Project, snapshot: Snapshot
) -> None:
    run = _run_with_job(project, snapshot, epochs=3)
    assert run.job is not None
    Job.objects.filter(pk=run.job.pk).update(cancel_requested=True)

    job = job_run(job_id=run.job.pk)

    run.refresh_from_db()
    assert job.state == Job.State.CANCELLED
    assert run.state == TrainingRun.State.CANCELLED


@pytest.mark.django_db
def test_a_cancel_sent_while_the_run_is_scoring_cancels_it(
    project: Project, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run_with_job(project, snapshot, epochs=1)
    assert run.job is not None
    job_id = run.job.pk
    score = training.score_split

    def cancel_while_scoring(*args: Any, **kwargs: Any) -> Any:
        scored = score(*args, **kwargs)
        if kwargs["metrics"] == FINAL_METRICS:  # the final scoring, not a validation
            Job.objects.filter(pk=job_id).update(cancel_requested=True)
        return scored

    monkeypatch.setattr(training, "score_split", cancel_while_scoring)

    job = job_run(job_id=job_id)

    run.refresh_from_db()
    assert job.state == Job.State.CANCELLED
    assert run.state == TrainingRun.State.CANCELLED
    assert run.stopped == "cancelled"
    assert run.metrics == {}
    assert run.checkpoint  # kept, so it can resume


# A run killed mid-training resumes from its stored checkpoint ---------------------------


@pytest.fixture
def resumed_from(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The step each training in this process resumed at."""
    steps: list[int] = []
    resume = Trainer._resume

    def spy(self: Trainer, path: str | Path) -> None:
        resume(self, path)
        steps.append(self.state.step)

    monkeypatch.setattr(Trainer, "_resume", spy)
    return steps


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_run_killed_mid_training_resumes_from_its_last_stored_checkpoint(
    project: Project,
    snapshot: Snapshot,
    media_root: Path,
    settings: Any,
    no_broker: list[tuple[Any, ...]],
    resumed_from: list[int],
) -> None:
    epochs = 8
    run = _run_with_job(project, snapshot, epochs=epochs)
    assert run.job is not None
    env = {
        **processes.environment(),
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "FEATURE_CACHE_DIR": str(settings.FEATURE_CACHE_DIR),
        "OMP_NUM_THREADS": "1",
    }
    command = processes.start(["manage", "run_job", str(run.job.pk)], env=env)
    try:

        def stored() -> bool:
            run.refresh_from_db()
            return bool(run.checkpoint) and run.state == TrainingRun.State.RUNNING

        processes.wait_until(stored, what="a stored checkpoint", process=command, timeout=300)
        command.signal(signal.SIGKILL)  # mid-training: the rest of the epochs are to come
        command.process.wait(timeout=30)
    finally:
        command.stop()
    run.refresh_from_db()
    at_kill = read_checkpoint(media_root / run.checkpoint.name)["step"]
    assert at_kill > 0
    left_behind = list(
        Path(tempfile.gettempdir()).glob(f"earmark-run-{run.pk}-pid{command.process.pid}-*")
    )
    assert left_behind  # the killed process could not clean up its work folder

    time.sleep(LEASE_SECONDS + 0.5)  # its job's lease runs out; the sweep ends job and run
    assert jobs_fail_lost() == 1
    run.refresh_from_db()
    assert run.state == TrainingRun.State.FAILED
    resumed = services.run_resume(run=run, user=None)
    assert resumed.job is not None
    job = job_run(job_id=resumed.job.pk)

    run.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert run.state == TrainingRun.State.SUCCEEDED
    assert resumed_from == [at_kill]  # not step 0
    assert [row["epoch"] for row in run.history] == list(range(1, epochs + 1))
    logged = [row["step"] for row in run.learning_curve if "loss" in row]
    assert logged == sorted(set(logged))  # steps after the checkpoint were not logged twice
    assert at_kill < run.steps == run.history[-1]["step"]
    assert not any(path.exists() for path in left_behind)
    assert os.path.exists(run.checkpoint.path)
