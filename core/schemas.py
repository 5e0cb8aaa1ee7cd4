"""API schemas shared by core.api and the apps' routers (curation.api), kept apart from
core.api so that routers can import them without importing the API that mounts them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema

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
