"""Evaluation API (mounted on /api/ by earmark.api): queue scoring of predicted captions, or the
human upper bound, against inline references or a project split; read the scores from the
job (/api/jobs/{id}, "result").

Only the project's researchers may do this (jobs are theirs to see): a project you are not
in is a 404, another role a 403.
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status

from core.access import Refusals, project_for_api, signed_in_user
from core.models import Role
from core.schemas import ErrorOut, JobOut
from core.services import job_enqueue
from corpus.evaluation import ALL_FAMILIES, EvaluationError, check_inputs, families
from corpus.evaluation_files import EvaluationFileError, Row, check_row, predictions_from_rows

router = Router(tags=["evaluation"])

MAX_CAPTIONS = 200_000  # AudioCaps train has 49,838; a request this big is a mistake
SplitName = Literal["train", "val", "test"]
EVALUATORS = Refusals(forbidden="Only the project's researchers may evaluate captions.")


class CaptionIn(Schema):
    id: str
    caption: str


class EvaluationIn(Schema):
    predictions: list[CaptionIn]
    # either references, one item per caption (an id repeats for each of its captions),
    references: list[CaptionIn] | None = None
    # or a split of the project, whose approved captions are the references
    split: SplitName | None = None
    metrics: list[str] = list(ALL_FAMILIES)


class HumanBoundIn(Schema):
    references: list[CaptionIn] | None = None
    split: SplitName | None = None
    metrics: list[str] = list(ALL_FAMILIES)


def _rows(items: list[CaptionIn], field: str) -> list[Row]:
    if len(items) > MAX_CAPTIONS:
        raise HttpError(400, f"{field}: {len(items)} captions; at most {MAX_CAPTIONS} per request.")
    try:
        return [check_row(field, f"item {n}", i.id, i.caption) for n, i in enumerate(items, 1)]
    except EvaluationFileError as exc:
        raise HttpError(400, str(exc)) from None


def _references(items: list[CaptionIn] | None, split: str | None) -> dict[str, list[str]] | None:
    if (items is None) == (split is None):
        raise HttpError(400, 'Give either "references" or "split".')
    if items is None:
        return None
    references: dict[str, list[str]] = {}
    for row in _rows(items, "references"):
        references.setdefault(row.key, []).append(row.caption)
    if not references:
        raise HttpError(400, "references: the list is empty.")
    return references


def _metrics(names: list[str]) -> list[str]:
    try:
        return list(families(names))
    except ValueError as exc:
        raise HttpError(400, f"metrics: {exc}") from None


@router.post(
    "/projects/{slug}/evaluations",
    response={201: JobOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
)
def evaluation_create(request: HttpRequest, slug: str, payload: EvaluationIn) -> Any:
    """Queues a "captions_evaluate" job; its result holds the scores."""
    project = project_for_api(request, slug, Role.RESEARCHER, refusals=EVALUATORS)
    rows = _rows(payload.predictions, "predictions")
    try:
        predictions = predictions_from_rows(rows, name="predictions")
    except EvaluationFileError as exc:
        raise HttpError(400, str(exc)) from None
    if not predictions:
        raise HttpError(400, "predictions: the list is empty.")
    references = _references(payload.references, payload.split)
    if references is not None:
        try:
            check_inputs(predictions, references)
        except EvaluationError as exc:
            raise HttpError(400, str(exc)) from None
    job = job_enqueue(
        kind="captions_evaluate",
        params={
            "predictions": predictions,
            "references": references,
            "split": payload.split or "",
            "metrics": _metrics(payload.metrics),
        },
        project=project,
        created_by=signed_in_user(request),
        label=f"Evaluate {len(predictions)} captions"
        + (f" against the {payload.split} split" if payload.split else ""),
    )
    return Status(201, job)


@router.post(
    "/projects/{slug}/human-upper-bound",
    response={201: JobOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
)
def human_bound_create(request: HttpRequest, slug: str, payload: HumanBoundIn) -> Any:
    """Queues a "captions_human_bound" job; its result holds the mean scores and each round's."""
    project = project_for_api(request, slug, Role.RESEARCHER, refusals=EVALUATORS)
    references = _references(payload.references, payload.split)
    if references is not None and all(len(refs) < 2 for refs in references.values()):
        raise HttpError(400, "references: no clip has two or more captions; a bound needs them.")
    job = job_enqueue(
        kind="captions_human_bound",
        params={
            "references": references,
            "split": payload.split or "",
            "metrics": _metrics(payload.metrics),
        },
        project=project,
        created_by=signed_in_user(request),
        label="Human upper bound" + (f" of the {payload.split} split" if payload.split else ""),
    )
    return Status(201, job)
