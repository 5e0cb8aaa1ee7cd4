"""Review API (mounted on /api/ by earmark.api): the queue of submitted work, one
assignment with its captions, hints and flags, and the decisions on it (approve, reject with a
reason, fix the text then approve).

Also a batch's requirements (who may take its HITs): reviewers read them, researchers set them.

A project you are not in is a 404; its researchers and reviewers read and review; annotators
get 403. The paths and operation ids are those these endpoints had under annotation.api, so
scripts and generated clients keep working.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from ninja import Field, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status

from annotation.models import Assignment, Batch, Caption
from core.access import project_for_api, signed_in_user
from core.models import Role
from core.schemas import ErrorOut, FieldErrorsOut, page_or_404, refusal
from crowd import services
from crowd.models import REVIEWERS, BatchRequirements, Qualification, RejectReason
from curation.models import Label

# Tagged and named as when they were part of the annotation API (see the docstring).
router = Router(tags=["annotation"])


class FlagOut(Schema):
    reason: str
    created_at: datetime


class ReviewCaptionOut(Schema):
    id: int
    clip_id: int
    audio_url: str | None
    text: str  # as the worker typed it
    fixed_text: str  # a reviewer's correction, "" when none
    heard: bool  # the worker heard the clip to the end on the HIT page
    video_hint_opened_at: datetime | None
    hints: list[str]
    flags: list[FlagOut]


class WorkerOut(Schema):
    id: int
    username: str


class ReviewOut(Schema):
    decision: str
    reason: str
    feedback: str
    reviewer: str | None
    automatic: bool
    created_at: datetime


class ReviewAssignmentOut(Schema):
    id: int
    state: str
    batch_id: int
    batch: str
    worker: WorkerOut
    accepted_at: datetime
    submitted_at: datetime | None
    auto_approve_at: datetime | None
    captions: list[ReviewCaptionOut]
    review: ReviewOut | None


class ReviewPageOut(Schema):
    count: int
    page: int
    pages: int
    items: list[ReviewAssignmentOut]


class ApproveIn(Schema):
    feedback: str = ""


class RejectIn(Schema):
    reason: str = Field(description=f"one of {', '.join(RejectReason.values)}")
    feedback: str = Field("", description="empty: the reason's standard feedback")


class FixIn(Schema):
    fixes: dict[int, str] = Field(description="caption id -> corrected text (both kept)")
    feedback: str = ""


def _project_assignment(request: HttpRequest, slug: str, pk: int) -> Assignment:
    project = project_for_api(request, slug, *REVIEWERS)
    assignment = (
        _review_rows(Assignment.objects.filter(hit__batch__project=project, pk=pk))
        .select_related("review__reviewer")
        .first()
    )
    if assignment is None:
        raise HttpError(404, f"No assignment #{pk} in project {slug!r}.")
    return assignment


def _review_rows(rows: QuerySet[Assignment]) -> QuerySet[Assignment]:
    captions = Caption.objects.select_related("clip").prefetch_related(
        Prefetch("clip__labels", queryset=Label.objects.select_related("word_label")),
        "flags",
    )
    return rows.select_related("hit__batch__project", "worker").prefetch_related(
        Prefetch("captions", queryset=captions.order_by("id")), "video_hints", "listens"
    )


def _review_out(assignment: Assignment) -> dict[str, Any]:
    batch = assignment.hit.batch
    slug = batch.project.slug
    opened = {v.clip_id: v.opened_at for v in assignment.video_hints.all()}
    heard = {listen.clip_id for listen in assignment.listens.all()}
    review = getattr(assignment, "review", None) if assignment.reviewed_at else None
    return {
        **{f: getattr(assignment, f) for f in ("id", "state", "accepted_at", "submitted_at")},
        "batch_id": batch.pk,
        "batch": batch.name,
        "worker": {"id": assignment.worker_id, "username": assignment.worker.get_username()},
        "auto_approve_at": (
            assignment.submitted_at + batch.auto_approve_delay
            if assignment.state == Assignment.State.SUBMITTED and assignment.submitted_at
            else None
        ),
        "captions": [
            {
                **{f: getattr(c, f) for f in ("id", "clip_id", "text", "fixed_text")},
                "audio_url": reverse("clip_audio", args=[slug, c.clip_id])
                if c.clip.audio
                else None,
                "heard": c.clip_id in heard,
                "video_hint_opened_at": opened.get(c.clip_id),
                "hints": sorted({label.word for label in c.clip.labels.all()}),
                "flags": [{"reason": f.reason, "created_at": f.created_at} for f in c.flags.all()],
            }
            for c in assignment.captions.all()
        ],
        "review": None
        if review is None
        else {
            **{f: getattr(review, f) for f in ("decision", "reason", "feedback", "automatic")},
            "reviewer": review.reviewer.get_username() if review.reviewer else None,
            "created_at": review.created_at,
        },
    }


@router.get(
    "/projects/{slug}/review",
    response={200: ReviewPageOut, 403: ErrorOut, 404: ErrorOut},
    operation_id="annotation_api_review_queue",
)
def review_queue(
    request: HttpRequest,
    slug: str,
    batch: int | None = None,
    worker: int | None = None,
    page: int = 1,
    per_page: int = 20,
) -> Any:
    """Submitted assignments waiting for review: flagged first, then oldest first."""
    project = project_for_api(request, slug, *REVIEWERS)
    queue = services.review_queue(project=project)
    if batch is not None:
        queue = queue.filter(hit__batch_id=batch)
    if worker is not None:
        queue = queue.filter(worker_id=worker)
    paginator, current = page_or_404(_review_rows(queue), page, per_page)
    items = [_review_out(a) for a in current]
    return {"count": paginator.count, "page": page, "pages": paginator.num_pages, "items": items}


@router.get(
    "/projects/{slug}/assignments/{assignment_id}",
    response={200: ReviewAssignmentOut, 403: ErrorOut, 404: ErrorOut},
    operation_id="annotation_api_review_assignment",
)
def review_assignment(request: HttpRequest, slug: str, assignment_id: int) -> Any:
    return _review_out(_project_assignment(request, slug, assignment_id))


REVIEW_RESPONSES = {
    200: ReviewAssignmentOut,
    400: FieldErrorsOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
}


@router.post(
    "/projects/{slug}/assignments/{assignment_id}/approve",
    response=REVIEW_RESPONSES,
    operation_id="annotation_api_review_approve",
)
def review_approve(request: HttpRequest, slug: str, assignment_id: int, payload: ApproveIn) -> Any:
    """Approves submitted work; the worker's reward is booked with the approval."""
    assignment = _project_assignment(request, slug, assignment_id)
    try:
        services.review_approve(
            assignment=assignment,
            reviewer=signed_in_user(request),
            feedback=payload.feedback.strip(),
        )
    except ValidationError as exc:
        return refusal(exc)
    return _review_out(_project_assignment(request, slug, assignment_id))


@router.post(
    "/projects/{slug}/assignments/{assignment_id}/reject",
    response=REVIEW_RESPONSES,
    operation_id="annotation_api_review_reject",
)
def review_reject(request: HttpRequest, slug: str, assignment_id: int, payload: RejectIn) -> Any:
    """Rejects submitted work with a canned reason; the HIT's slot re-opens for another
    worker, and the worker reads `feedback` (or the reason's standard text)."""
    assignment = _project_assignment(request, slug, assignment_id)
    try:
        services.review_reject(
            assignment=assignment,
            reviewer=signed_in_user(request),
            reason=payload.reason,
            feedback=payload.feedback,
        )
    except ValidationError as exc:
        return refusal(exc)
    return _review_out(_project_assignment(request, slug, assignment_id))


@router.post(
    "/projects/{slug}/assignments/{assignment_id}/fix",
    response=REVIEW_RESPONSES,
    operation_id="annotation_api_review_fix",
)
def review_fix(request: HttpRequest, slug: str, assignment_id: int, payload: FixIn) -> Any:
    """Corrects captions' text (the worker's version is kept beside it), then approves."""
    assignment = _project_assignment(request, slug, assignment_id)
    try:
        services.review_approve(
            assignment=assignment,
            reviewer=signed_in_user(request),
            feedback=payload.feedback.strip(),
            fixes=payload.fixes,
        )
    except ValidationError as exc:
        return refusal(exc)
    return _review_out(_project_assignment(request, slug, assignment_id))


# Batch requirements ----------------------------------------------------------------------


class RequirementsOut(Schema):
    qualifications: list[int]  # ids of the project's qualification tests to pass
    min_approval_percent: int
    min_approved: int
    # False: the worker's record in this project; True: over every project
    site_wide_record: bool
    locales: list[str]  # ISO 3166 codes of the countries admitted; empty: any


class RequirementsIn(Schema):
    qualifications: list[int] = []
    min_approval_percent: int = 0
    min_approved: int = 0
    site_wide_record: bool = Field(
        False, description="count the worker's reviews in every project, not only this one"
    )
    locales: list[str] = Field(
        [], description="ISO 3166 country codes a worker must have declared; none: any"
    )


def _project_batch(request: HttpRequest, slug: str, batch_id: int, *roles: str) -> Batch:
    project = project_for_api(request, slug, *roles)
    batch = Batch.objects.filter(project=project, pk=batch_id).select_related("project").first()
    if batch is None:
        raise HttpError(404, f"No batch #{batch_id} in project {slug!r}.")
    return batch


def _requirements_out(batch: Batch) -> dict[str, Any]:
    current = BatchRequirements.objects.filter(batch=batch).first()
    if current is None:  # no requirements: anyone in the project may work on it
        return {
            "qualifications": [],
            "min_approval_percent": 0,
            "min_approved": 0,
            "site_wide_record": False,
            "locales": [],
        }
    return {
        "qualifications": sorted(current.qualifications.values_list("pk", flat=True)),
        "min_approval_percent": current.min_approval_percent,
        "min_approved": current.min_approved,
        "site_wide_record": current.site_wide_record,
        "locales": sorted(current.locales.values_list("country", flat=True)),
    }


@router.get(
    "/projects/{slug}/batches/{batch_id}/requirements",
    response={200: RequirementsOut, 403: ErrorOut, 404: ErrorOut},
    tags=["crowd"],
)
def requirements_get(request: HttpRequest, slug: str, batch_id: int) -> Any:
    """What a worker needs before the batch's HITs are offered to them."""
    return _requirements_out(_project_batch(request, slug, batch_id, *REVIEWERS))


@router.put(
    "/projects/{slug}/batches/{batch_id}/requirements",
    response={200: RequirementsOut, 400: FieldErrorsOut, 403: ErrorOut, 404: ErrorOut},
    tags=["crowd"],
)
def requirements_put(
    request: HttpRequest, slug: str, batch_id: int, payload: RequirementsIn
) -> Any:
    """Replaces the batch's requirements; they apply from the next claim."""
    batch = _project_batch(request, slug, batch_id, Role.RESEARCHER)
    qualifications = list(Qualification.objects.filter(project=batch.project))
    by_id = {q.pk: q for q in qualifications}
    unknown = sorted(set(payload.qualifications) - set(by_id))
    if unknown:
        detail = f"No qualification {unknown} in project {slug!r}."
        return Status(400, {"detail": detail, "errors": {"qualifications": [detail]}})
    try:
        services.batch_requirements_set(
            batch=batch,
            by=signed_in_user(request),
            qualifications=[by_id[pk] for pk in payload.qualifications],
            min_approval_percent=payload.min_approval_percent,
            min_approved=payload.min_approved,
            site_wide_record=payload.site_wide_record,
            locales=payload.locales,
        )
    except ValidationError as exc:
        return refusal(exc)
    return _requirements_out(batch)
