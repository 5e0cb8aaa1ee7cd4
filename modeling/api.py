"""Modeling API (mounted on /api/ by earmark.api): training runs — list, start, status,
cancel, resume, a new run from a finished one's checkpoint, promote — and the captions a run
suggests.

As on the pages: a project you are not in is a 404; researchers and reviewers read;
researchers start and change runs. Staff also queue the import of the authors' released weights
into the weights folder (``POST /api/weights/import``; README "Using the authors' weights").
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from ninja import Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status

from core.access import Refusals, project_for_api, signed_in_user
from core.models import Project, Role
from core.schemas import ErrorOut, JobOut
from core.services import job_cancel, job_enqueue
from corpus.models import Snapshot
from curation.models import Subset
from curation.queries import project_clips
from modeling import services
from modeling.models import Suggestion, TrainingRun
from modeling.weights import weights_import_queue

router = Router(tags=["modeling"])

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)
MAX_PER_PAGE = 500
REFUSALS = Refusals(
    not_found="No such project.",
    forbidden="You do not have access to this project.",
    staff_see_all=False,
)


class RunIn(Schema):
    model: str
    snapshot: int  # the snapshot's version in the project
    preset: str = "small"  # model size; another than "paper" is recorded as scaled down
    overrides: list[str] = []
    # caption epochs the model's recipe is scaled to (its other stages in proportion);
    # None trains the recipe's
    epochs: int | None = None
    # one of the model's recipes (modeling.ml.presets.recipe_names: "maac", "maac-code", ...);
    # "" its paper's
    recipe: str = ""


class RunOut(Schema):
    id: int
    model_name: str
    snapshot_version: int
    state: str
    config: dict[str, Any]
    recipe: dict[str, Any]
    overrides: list[str]
    metrics: dict[str, dict[str, float | None]]
    metrics_unavailable: dict[str, str]
    best_score: float | None
    steps: int
    stopped: str
    device: str
    duration_seconds: float | None
    code_version: str
    error: str
    warnings: list[str]  # clips left out because their audio could not be read
    job_id: int | None
    promoted: bool
    started_from: int | None  # the run whose checkpoint this one started from
    created_at: datetime
    finished_at: datetime | None


class CurvePointOut(Schema):
    step: int
    epoch: int
    loss: float | None = None
    lr: float | None = None
    val_loss: float | None = None
    score: float | None = None


class StartFromIn(Schema):
    epochs: int | None = None  # caption epochs of the new run; None: the source run's


class SuggestIn(Schema):
    subset: str | None = None  # a subset slug of the project
    clips: list[int] | None = None
    beam_size: int | None = None  # None: the run's recipe's beam


class SuggestionOut(Schema):
    clip_id: int
    text: str
    log_prob: float
    mean_entropy: float
    hypotheses: list[dict[str, Any]]
    beam_size: int
    created_at: datetime


def _run(project: Project, run_id: int) -> TrainingRun:
    run = TrainingRun.objects.select_related("snapshot").filter(project=project, pk=run_id).first()
    if run is None:
        raise HttpError(404, f"No run #{run_id} in this project.")
    return run


def _out(run: TrainingRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "model_name": run.model_name,
        "snapshot_version": run.snapshot.version,
        "state": run.state,
        "config": run.config,
        "recipe": run.recipe,
        "overrides": run.overrides,
        "metrics": run.metrics,
        "metrics_unavailable": run.metrics_unavailable,
        "best_score": run.best_score,
        "steps": run.steps,
        "stopped": run.stopped,
        "device": run.device,
        "duration_seconds": run.duration_seconds,
        "code_version": run.code_version,
        "error": run.error,
        "warnings": run.warnings,
        "job_id": run.job_id,
        "promoted": run.promoted_at is not None,
        "started_from": run.started_from_id,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
    }


def _messages(exc: ValidationError) -> str:
    return "; ".join(exc.messages)


@router.get("/projects/{slug}/runs", response=list[RunOut])
def run_list(request: HttpRequest, slug: str, state: str | None = None) -> Any:
    project = project_for_api(request, slug, *READ, refusals=REFUSALS)
    runs = TrainingRun.objects.filter(project=project).select_related("snapshot")
    if state:
        runs = runs.filter(state=state)
    return [_out(run) for run in runs[:MAX_PER_PAGE]]


@router.post("/projects/{slug}/runs", response={201: RunOut, 400: ErrorOut})
def run_create(request: HttpRequest, slug: str, payload: RunIn) -> Any:
    project = project_for_api(request, slug, *WRITE, refusals=REFUSALS)
    snapshot = Snapshot.objects.filter(project=project, version=payload.snapshot).first()
    if snapshot is None:
        return Status(400, {"detail": f"No snapshot v{payload.snapshot} in this project."})
    try:
        run = services.run_start(
            project=project,
            model_name=payload.model,
            snapshot=snapshot,
            created_by=signed_in_user(request),
            preset=payload.preset,
            overrides=payload.overrides,
            epochs=payload.epochs,
            recipe=payload.recipe,
        )
    except ValidationError as exc:
        return Status(400, {"detail": _messages(exc)})
    return Status(201, _out(run))


@router.get("/projects/{slug}/runs/{run_id}", response=RunOut)
def run_get(request: HttpRequest, slug: str, run_id: int) -> Any:
    return _out(_run(project_for_api(request, slug, *READ, refusals=REFUSALS), run_id))


@router.get("/projects/{slug}/runs/{run_id}/curve", response=list[CurvePointOut])
def run_curve(request: HttpRequest, slug: str, run_id: int) -> Any:
    return _run(project_for_api(request, slug, *READ, refusals=REFUSALS), run_id).learning_curve


@router.post("/projects/{slug}/runs/{run_id}/cancel", response={200: RunOut, 409: ErrorOut})
def run_cancel(request: HttpRequest, slug: str, run_id: int) -> Any:
    run = _run(project_for_api(request, slug, *WRITE, refusals=REFUSALS), run_id)
    if run.job is None:
        return Status(409, {"detail": "This run has no job to cancel."})
    try:
        job_cancel(job=run.job)
    except ValidationError as exc:
        return Status(409, {"detail": _messages(exc)})
    run.refresh_from_db()
    return Status(200, _out(run))


@router.post("/projects/{slug}/runs/{run_id}/resume", response={200: RunOut, 409: ErrorOut})
def run_resume(request: HttpRequest, slug: str, run_id: int) -> Any:
    run = _run(project_for_api(request, slug, *WRITE, refusals=REFUSALS), run_id)
    try:
        return Status(200, _out(services.run_resume(run=run, user=signed_in_user(request))))
    except ValidationError as exc:
        return Status(409, {"detail": _messages(exc)})


@router.post(
    "/projects/{slug}/runs/{run_id}/start-from",
    response={201: RunOut, 400: ErrorOut, 409: ErrorOut},
)
def run_start_from(request: HttpRequest, slug: str, run_id: int, payload: StartFromIn) -> Any:
    """A new run from this succeeded run's checkpoint (a finished run does not resume)."""
    run = _run(project_for_api(request, slug, *WRITE, refusals=REFUSALS), run_id)
    if run.state != TrainingRun.State.SUCCEEDED:
        detail = f"Run #{run.pk} is {run.state}; a new run starts from a succeeded run."
        return Status(409, {"detail": detail})
    try:
        new = services.run_start_from(
            run=run, created_by=signed_in_user(request), epochs=payload.epochs
        )
    except ValidationError as exc:
        return Status(400, {"detail": _messages(exc)})
    return Status(201, _out(new))


@router.post("/projects/{slug}/runs/{run_id}/promote", response={200: RunOut, 409: ErrorOut})
def run_promote(request: HttpRequest, slug: str, run_id: int) -> Any:
    run = _run(project_for_api(request, slug, *WRITE, refusals=REFUSALS), run_id)
    try:
        promotion = services.run_promote(run=run, user=signed_in_user(request))
        return Status(200, _out(promotion.run))
    except ValidationError as exc:
        return Status(409, {"detail": _messages(exc)})


@router.post(
    "/projects/{slug}/runs/{run_id}/suggest", response={201: JobOut, 400: ErrorOut, 409: ErrorOut}
)
def run_suggest(request: HttpRequest, slug: str, run_id: int, payload: SuggestIn) -> Any:
    project = project_for_api(request, slug, *WRITE, refusals=REFUSALS)
    run = _run(project, run_id)
    if run.state != TrainingRun.State.SUCCEEDED:
        detail = f"Run #{run.pk} is {run.state}; only a finished run suggests."
        return Status(409, {"detail": detail})
    if payload.beam_size is not None and not 1 <= payload.beam_size <= 10:
        return Status(400, {"detail": "The beam size is between 1 and 10."})
    subset_id = None
    if payload.subset:
        subset = Subset.objects.filter(project=project, slug=payload.subset).first()
        if subset is None:
            return Status(400, {"detail": f"No subset {payload.subset!r} in this project."})
        subset_id = subset.pk
    if subset_id is None and not payload.clips:
        return Status(400, {"detail": "Name a subset or clips to caption."})
    if payload.clips:
        wanted = set(payload.clips)
        ours = set(project_clips(project).filter(pk__in=wanted).values_list("pk", flat=True))
        if wanted - ours:
            return Status(400, {"detail": f"Not clips of this project: {sorted(wanted - ours)}."})
    job = job_enqueue(
        kind="clips_caption",
        params={
            "run_id": run.pk,
            "subset_id": subset_id,
            "clip_ids": payload.clips,
            "beam_size": payload.beam_size,
        },
        project=project,
        created_by=signed_in_user(request),
        label=f"Suggest captions with run #{run.pk}",
    )
    return Status(201, job)


@router.get("/projects/{slug}/runs/{run_id}/suggestions", response=list[SuggestionOut])
def suggestion_list(
    request: HttpRequest, slug: str, run_id: int, offset: int = 0, limit: int = 100
) -> Any:
    run = _run(project_for_api(request, slug, *READ, refusals=REFUSALS), run_id)
    rows = Suggestion.objects.filter(run=run).order_by("clip_id")
    offset = max(offset, 0)
    return rows[offset : offset + max(1, min(limit, MAX_PER_PAGE))]


# Released weights ------------------------------------------------------------------------


class WeightsImportIn(Schema):
    kind: str  # modeling.ml.config_released.RELEASED_KINDS
    file: str  # in ENCODER_WEIGHTS_DIR, relative to it
    words: str = ""  # the released word list (act, vact_concat, maac)
    keyword_words: str = ""  # MAAC's TaggingToEmbs.p
    name: str = ""  # stored file name under released/, without .pt


@router.post("/weights/import", response={201: JobOut, 400: ErrorOut, 403: ErrorOut})
def weights_import(request: HttpRequest, payload: WeightsImportIn) -> Any:
    """Queues a "weights_import" job (the weights folder serves every project: staff only);
    follow it at /api/jobs/{id}."""
    user = signed_in_user(request)
    if not user.is_staff:
        return Status(403, {"detail": "Only staff import weights."})
    try:
        job = weights_import_queue(
            kind=payload.kind,
            file=payload.file,
            words=payload.words,
            keyword_words=payload.keyword_words,
            name=payload.name,
            created_by=user,
        )
    except ValidationError as exc:
        return Status(400, {"detail": _messages(exc)})
    return Status(201, job)
