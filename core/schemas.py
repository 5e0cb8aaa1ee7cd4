"""What the API routers share: common schemas, and how refusals and pages are answered.
Kept apart from earmark.api so that routers can import them without importing the API that
mounts them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.core.paginator import EmptyPage, Page, Paginator
from django.db.models import QuerySet
from ninja import Schema
from ninja.errors import HttpError
from ninja.responses import Status

from core.models import Job


class JobOut(Schema):
    id: int
    kind: str
    label: str
    state: str
    project: str | None
    progress_done: int
    progress_total: int | None
    progress_message: str
    progress_text: str  # the message and the count, as the job pages show them
    percent: int | None
    error: str
    result: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    retry_of: int | None

    @staticmethod
    def resolve_project(job: Job) -> str | None:
        return job.project.slug if job.project else None

    @staticmethod
    def resolve_retry_of(job: Job) -> int | None:
        return job.retry_of_id


class ErrorOut(Schema):
    detail: str


class FieldErrorsOut(Schema):
    detail: str
    # field -> messages; captions are "caption-<clip id>", fixes "fix-<caption id>"
    errors: dict[str, list[str]]


def error_text(exc: ValidationError) -> str:
    return " ".join(exc.messages)


def refusal(exc: ValidationError) -> Status:
    """400 with the field errors when the input was wrong; 409 when the object's state
    refuses the change (already submitted, out of time, already reviewed)."""
    if hasattr(exc, "error_dict"):
        return Status(400, {"detail": error_text(exc), "errors": exc.message_dict})
    return Status(409, {"detail": error_text(exc)})


def page_or_404(
    rows: QuerySet[Any], page: int, per_page: int, *, max_per_page: int = 500
) -> tuple[Paginator[Any], Page[Any]]:
    """One page of rows, `per_page` clamped to 1..max_per_page; 404 past the last page."""
    paginator = Paginator(rows, max(1, min(per_page, max_per_page)))
    try:
        return paginator, paginator.page(page)
    except EmptyPage:
        raise HttpError(404, f"No page {page}; there are {paginator.num_pages}.") from None
