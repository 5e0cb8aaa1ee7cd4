"""Active-learning API (mounted on /api/ by earmark.api): a batch's strategy, scores and flag
rate; promotion decisions; retrains; learning curves; a batch as a Label Studio project and
Label Studio's JSON export imported back as captions.

As on the pages: a project you are not in is a 404; researchers and reviewers read;
researchers change things.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.urls import reverse
from ninja import File, Router, Schema, UploadedFile
from ninja.errors import HttpError
from ninja.responses import Status

from active import services
from active.models import ClipScore, PromotionDecision, Retrain
from annotation.models import Batch
from core.access import TERSE, project_for_api, signed_in_user
from core.models import Project, Role
from core.schemas import ErrorOut
from core.uploads import accepts_uploads

router = Router(tags=["active learning"])

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)


class BatchActiveIn(Schema):
    strategy: str
    presuggest: str = "blind"
    seed: int | None = None


class ClipScoreOut(Schema):
    clip_id: int
    rank: int
    score: float | None
    priority: float
    details: dict[str, Any]


class BatchActiveOut(Schema):
    batch: int
    strategy: str
    presuggest: str
    seed: int
    ranked_at: datetime | None
    ranked_with_run: int | None
    flags: dict[str, Any]
    edits: dict[str, Any]
    scores: list[ClipScoreOut]


class DecisionOut(Schema):
    id: int
    run: int
    incumbent: int | None
    metric: str
    run_score: float | None
    incumbent_score: float | None
    promoted: bool
    reason: str
    created_at: datetime


class RetrainOut(Schema):
    id: int
    trigger: str
    reason: str
    approved_captions: int
    job_id: int | None
    run_id: int | None
    created_at: datetime


class CurveIn(Schema):
    label: str
    metric: str = "CIDEr-D"
    curves: dict[str, list[dict[str, Any]]]


def _batch(project: Project, batch_id: int) -> Batch:
    batch = Batch.objects.filter(project=project, pk=batch_id).first()
    if batch is None:
        raise HttpError(404, f"No batch #{batch_id} in this project.")
    return batch


def _batch_out(batch: Batch) -> dict[str, Any]:
    config = services.batch_config(batch=batch)
    return {
        "batch": batch.pk,
        "strategy": config.strategy,
        "presuggest": config.presuggest,
        "seed": config.seed,
        "ranked_at": config.ranked_at,
        "ranked_with_run": config.ranked_with_id,
        "flags": services.batch_flag_rate(batch=batch),
        "edits": services.edit_stats(batch=batch),
        "scores": list(ClipScore.objects.filter(batch=batch).order_by("rank")),
    }


@router.get("/projects/{slug}/batches/{batch_id}/active", response=BatchActiveOut)
def batch_active(request: HttpRequest, slug: str, batch_id: int) -> Any:
    return _batch_out(_batch(project_for_api(request, slug, *READ, refusals=TERSE), batch_id))


@router.post(
    "/projects/{slug}/batches/{batch_id}/active", response={200: BatchActiveOut, 400: ErrorOut}
)
def batch_active_set(request: HttpRequest, slug: str, batch_id: int, body: BatchActiveIn) -> Any:
    batch = _batch(project_for_api(request, slug, *WRITE, refusals=TERSE), batch_id)
    try:
        services.batch_configure(
            batch=batch,
            user=signed_in_user(request),
            strategy=body.strategy,
            presuggest=body.presuggest,
            seed=body.seed,
        )
    except ValidationError as exc:
        return Status(400, {"detail": "; ".join(exc.messages)})
    return _batch_out(batch)


@router.get("/projects/{slug}/active/decisions", response=list[DecisionOut])
def decisions(request: HttpRequest, slug: str) -> Any:
    project = project_for_api(request, slug, *READ, refusals=TERSE)
    return [
        {
            "id": d.pk,
            "run": d.run_id,
            "incumbent": d.incumbent_id,
            "metric": d.metric,
            "run_score": d.run_score,
            "incumbent_score": d.incumbent_score,
            "promoted": d.promoted,
            "reason": d.reason,
            "created_at": d.created_at,
        }
        for d in PromotionDecision.objects.filter(project=project)[:200]
    ]


@router.get("/projects/{slug}/active/retrains", response=list[RetrainOut])
def retrains(request: HttpRequest, slug: str) -> Any:
    project = project_for_api(request, slug, *READ, refusals=TERSE)
    return list(Retrain.objects.filter(project=project)[:200])


@router.post("/projects/{slug}/active/retrains", response={202: RetrainOut})
def retrain_start(request: HttpRequest, slug: str) -> Any:
    project = project_for_api(request, slug, *WRITE, refusals=TERSE)
    retrain = services.retrain_start(
        project=project,
        trigger=Retrain.Trigger.MANUAL,
        reason=f"API call by {request.user.get_username()}",
        user=signed_in_user(request),
    )
    return Status(202, retrain)


@router.get("/projects/{slug}/active/curve", response=list[dict[str, Any]])
def curve(request: HttpRequest, slug: str) -> Any:
    return services.curve_series(project=project_for_api(request, slug, *READ, refusals=TERSE))


@router.post("/projects/{slug}/active/curve", response={201: dict[str, int], 400: ErrorOut})
def curve_import(request: HttpRequest, slug: str, body: CurveIn) -> Any:
    project = project_for_api(request, slug, *WRITE, refusals=TERSE)
    try:
        n = services.curve_import(project=project, user=signed_in_user(request), data=body.dict())
    except ValidationError as exc:
        return Status(400, {"detail": "; ".join(exc.messages)})
    return Status(201, {"points": n})


class LabelStudioProjectOut(Schema):
    label_config: str  # Label Studio's Labeling Setup → Code
    tasks: list[dict[str, Any]]  # to import into it (audio URL and clip id per task)


class LabelStudioImportOut(Schema):
    tasks: int
    annotations: int
    created: int
    updated: int
    unchanged: int
    skipped_tasks: int


@router.get("/projects/{slug}/batches/{batch_id}/labelstudio", response=LabelStudioProjectOut)
def batch_labelstudio(request: HttpRequest, slug: str, batch_id: int) -> Any:
    """The batch as a Label Studio project: its labelling config and one task per clip."""
    project = project_for_api(request, slug, *READ, refusals=TERSE)
    batch = _batch(project, batch_id)

    def audio_url(clip_id: int) -> str:
        return request.build_absolute_uri(reverse("clip_audio", args=[project.slug, clip_id]))

    return {
        "label_config": services.labelstudio_config(batch=batch),
        "tasks": services.labelstudio_tasks(batch=batch, audio_url=audio_url),
    }


@router.post(
    "/projects/{slug}/labelstudio/import",
    response={201: LabelStudioImportOut, 400: ErrorOut},
)
@accepts_uploads
def labelstudio_import(request: HttpRequest, slug: str, file: File[UploadedFile]) -> Any:
    """Captions from Label Studio's JSON export (multipart field "file"), all or nothing."""
    project = project_for_api(request, slug, *WRITE, refusals=TERSE)
    try:
        name, data = services.labelstudio_upload_read(file)
        outcome = services.labelstudio_import(
            project=project, data=data, file_name=name, user=signed_in_user(request)
        )
    except ValidationError as exc:
        return Status(400, {"detail": " ".join(exc.messages)})
    return Status(201, outcome.as_dict())
