"""Prolific as an annotation.platforms.base.CrowdPlatform."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from annotation.models import Assignment, Batch, Hit, Platform
from annotation.platforms.base import Counts
from annotation.platforms.prolific.blocks import prolific_blocks_sync
from annotation.platforms.prolific.client import prolific_client
from annotation.platforms.prolific.page import prolific_assignment_start, prolific_submit_check
from annotation.platforms.prolific.publish import (
    batch_prolific_publish,
    completion_code,
    prolific_filters,
    publish_check,
)
from annotation.platforms.prolific.reconcile import prolific_reconcile
from annotation.platforms.prolific.sync import (
    prolific_bonuses_send,
    prolific_decisions_send,
    prolific_returns_sync,
    prolific_sync,
)
from core.progress import ProgressFn


class ProlificPlatform:
    name = Platform.PROLIFIC
    label = "Prolific"

    def publish(self, *, batch: Batch, by: User | None, progress: ProgressFn) -> dict[str, Any]:
        return batch_prolific_publish(batch=batch, by=by, progress=progress)

    def publish_check(self, *, batch: Batch) -> None:
        if not settings.PROLIFIC_TOKEN:
            raise ValidationError(
                "Set PROLIFIC_TOKEN to a Prolific API token first (manage.py prolific_check "
                "tests it)."
            )
        publish_check(batch)

    def requirements(self, *, batch: Batch) -> list[dict[str, Any]]:
        return prolific_filters(batch, client=prolific_client())

    def arrive(self, *, batch: Batch, hit: Hit | None, params: Mapping[str, str]) -> Assignment:
        return prolific_assignment_start(
            batch=batch,
            participant_id=params.get("PROLIFIC_PID", ""),
            study=params.get("STUDY_ID", ""),
            session_id=params.get("SESSION_ID", ""),
        )

    def submit_check(self, *, assignment: Assignment) -> None:
        prolific_submit_check(assignment=assignment)

    def completion_url(self, *, assignment: Assignment, params: Mapping[str, str]) -> str:
        query = urlencode({"cc": completion_code(assignment.hit.batch)})
        return f"{settings.PROLIFIC_COMPLETE_URL}?{query}"

    def confirm(self) -> Counts:
        return {}  # an active submission names its participant: confirmed on arrival

    def decisions_send(self) -> Counts:
        return prolific_decisions_send(client=prolific_client())

    def bonuses_send(self) -> Counts:
        return prolific_bonuses_send(client=prolific_client())

    def returns_sync(self) -> Counts:
        return prolific_returns_sync(client=prolific_client())

    def blocks_mirror(self) -> Counts:
        return prolific_blocks_sync(client=prolific_client())

    def reconcile(self) -> Counts:
        return prolific_reconcile(client=prolific_client())

    def sync(self) -> Counts:
        return prolific_sync()
