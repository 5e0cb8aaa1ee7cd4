"""Training runs: recording a run and queuing its training (`run_start`), queuing a stopped
run again (`run_resume`), a new run from a finished one's checkpoint (`run_start_from`), and
choosing the project's suggesting run (`run_promote`).

What a run trains is `modeling.planning` (`run_plan`); training it on a gpu worker is
`modeling.training` (the `training_run` job); scoring a checkpoint is `modeling.scoring`,
captioning clips with a finished run (suggestions) `modeling.suggestions`. This module and
planning import no torch: the web process starts runs (tests/test_import_graph.py checks).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.models import Job, Project
from core.services import job_enqueue
from corpus.models import Snapshot
from curation.models import Clip
from curation.queries import project_clips
from modeling.models import TrainingRun
from modeling.planning import run_plan


def run_start(
    *,
    project: Project,
    model_name: str,
    snapshot: Snapshot,
    created_by: User | None,
    preset: str = "small",
    overrides: Sequence[str] = (),
    epochs: int | None = None,
    recipe: str = "",
    enqueue: bool = True,
) -> TrainingRun:
    """Records a run (its config and its recipe, see `run_plan`; `recipe` names one of the
    model's recipes, "" its paper's) and (with `enqueue`) queues its training on the gpu
    queue."""
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
    plan = run_plan(
        model_name=model_name, preset=preset, overrides=overrides, epochs=epochs, recipe=recipe
    )
    with transaction.atomic():
        run = TrainingRun.objects.create(
            project=project,
            model_name=model_name,
            config=plan.config,
            recipe=plan.recipe,
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


def run_resume(*, run: TrainingRun, user: User | None) -> TrainingRun:
    """Queues a cancelled or failed run again; training continues from its last stored
    checkpoint. A run still marked queued or running whose job has ended (a row from before
    runs followed their jobs) counts as stopped. A run that succeeded never resumes: that
    would overwrite its steps and scores from its best checkpoint; `run_start_from` trains
    a new run from that checkpoint instead."""
    if run.state == TrainingRun.State.SUCCEEDED:
        raise ValidationError(
            f"Run #{run.pk} succeeded; a finished run does not resume. Start a new run from "
            "its checkpoint instead."
        )
    stopped = run.state in (TrainingRun.State.CANCELLED, TrainingRun.State.FAILED) or (
        run.job is not None and run.job.is_finished
    )
    if not stopped:
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


def run_start_from(
    *, run: TrainingRun, created_by: User | None, epochs: int | None = None
) -> TrainingRun:
    """Records and queues a new run that starts from a succeeded run's checkpoint: the same
    model, settings, recipe and snapshot, its weights taken from the checkpoint (the
    optimizer, schedule and epochs start afresh), trained for `epochs` caption epochs
    (default the source's; its other stages as the source's). The source row keeps its
    steps, scores and checkpoint."""
    if run.state != TrainingRun.State.SUCCEEDED or not run.checkpoint:
        raise ValidationError(
            f"Run #{run.pk} is {run.state}; a new run starts from a succeeded run's checkpoint."
        )
    if epochs is not None and epochs < 1:
        raise ValidationError(f"epochs={epochs}: a run trains at least 1 epoch.")
    config = copy.deepcopy(run.config)
    overrides = list(run.overrides)
    if epochs is not None:
        config["run"]["train"]["epochs"] = epochs
        overrides = [o for o in overrides if not o.strip().startswith("train.epochs=")]
        overrides.append(f"train.epochs={epochs}")
    with transaction.atomic():
        new = TrainingRun.objects.create(
            project=run.project,
            model_name=run.model_name,
            config=config,
            recipe=run.recipe,
            overrides=overrides,
            snapshot=run.snapshot,
            created_by=created_by,
            started_from=run,
        )
        new.job = job_enqueue(
            kind="training_run",
            params={"run_id": new.pk},
            project=run.project,
            created_by=created_by,
            label=f"Train {run.model_name} from run #{run.pk}'s checkpoint (run #{new.pk})",
        )
        new.save(update_fields=["job"])
    return new


# The job that makes a promoted run's suggestions, switches to it at its end and re-ranks
# the open batches (active.services.suggestions.project_suggest_job, named by its kind).
PROMOTE_JOB_KIND = "active_suggest"


@dataclass(frozen=True)
class Promotion:
    run: TrainingRun
    switched: bool  # the run suggests captions now
    missing: int  # clips it suggests for first (it switches at the end of `job`)
    job: Job

    @property
    def message(self) -> str:
        if self.switched:
            return f"Run #{self.run.pk} now suggests captions for the project."
        return (
            f"Run #{self.run.pk} suggests captions once its suggestions for {self.missing:,} "
            f"clip(s) are made (job #{self.job.pk}); until then the current run does."
        )


def clips_unsuggested(*, run: TrainingRun) -> QuerySet[Clip]:
    """The project's ready clips with audio that the run has no suggestion for."""
    return (
        project_clips(run.project, status=Clip.Status.READY)
        .exclude(audio="")
        .exclude(suggestions__run=run)
    )


def run_promote(*, run: TrainingRun, user: User | None = None) -> Promotion:
    """The one way a run becomes the project's suggesting model: the runs page, the API and
    a retrain's promote-if-better all come here. Annotators, reviewers and Label Studio
    read the suggesting run's stored suggestions, and a run switched to before it has
    suggested shows nothing (Label Studio keeps the empty predictions of its version for
    good). So a run with a suggestion for every ready clip of the project switches at
    once; any other is queued to suggest them and switches at the end of that job
    (run_promotion_finish), unless another promotion was asked for meanwhile. Either way
    the job re-ranks the open batches with it."""
    if run.state != TrainingRun.State.SUCCEEDED:
        raise ValidationError(f"Run #{run.pk} is {run.state}; only a finished run is promoted.")
    missing = clips_unsuggested(run=run).count()
    with transaction.atomic():
        if not missing:
            _run_switch(run)
        job = job_enqueue(
            kind=PROMOTE_JOB_KIND,
            params={"run_id": run.pk, "promote": bool(missing)},
            project=run.project,
            created_by=user,
            label=(
                f"Suggest captions with run #{run.pk}, then make it the suggesting model"
                if missing
                else f"Re-rank open batches with promoted run #{run.pk}"
            ),
        )
    return Promotion(run=run, switched=not missing, missing=missing, job=job)


def run_promotion_finish(*, run: TrainingRun) -> bool:
    """At the end of the job run_promote queued, once the run's suggestions exist: switches
    to it if it is still the project's latest promotion asked for, and no other run was
    switched to since it was asked; -> whether it switched."""
    latest = (
        Job.objects.filter(kind=PROMOTE_JOB_KIND, project=run.project, params__promote=True)
        .order_by("-pk")
        .first()
    )
    if latest is None or latest.params.get("run_id") != run.pk:
        return False
    switched_since = TrainingRun.objects.filter(
        project=run.project, promoted_at__gt=latest.created_at
    ).exclude(pk=run.pk)
    if switched_since.exists():
        return False
    _run_switch(run)
    return True


def _run_switch(run: TrainingRun) -> None:
    """Makes this run the project's suggesting model (one per project)."""
    with transaction.atomic():
        TrainingRun.objects.filter(project=run.project, promoted_at__isnull=False).exclude(
            pk=run.pk
        ).update(promoted_at=None)
        run.promoted_at = timezone.now()
        run.save(update_fields=["promoted_at"])
