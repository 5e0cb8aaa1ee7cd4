"""MTurk as an annotation.platforms.base.CrowdPlatform."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from annotation.models import Assignment, Batch, Hit, Platform
from annotation.platforms.base import Counts, sync_steps
from annotation.platforms.mturk.blocks import mturk_blocks_sync
from annotation.platforms.mturk.bonuses import mturk_bonuses_send
from annotation.platforms.mturk.client import hit_mturk_id, mturk_client
from annotation.platforms.mturk.confirm import mturk_submissions_confirm
from annotation.platforms.mturk.page import (
    mturk_assignment_start,
    mturk_submit_check,
    submit_to_checked,
)
from annotation.platforms.mturk.publish import (
    batch_mturk_publish,
    publish_check,
    qualification_requirements,
)
from annotation.platforms.mturk.qualifications import mturk_qualifications_sync
from annotation.platforms.mturk.reconcile import mturk_reconcile
from annotation.platforms.mturk.reviews import mturk_returns_sync, mturk_reviews_send
from core.progress import ProgressFn


class MTurkPlatform:
    name = Platform.MTURK
    label = "Amazon Mechanical Turk"

    def publish(self, *, batch: Batch, by: User | None, progress: ProgressFn) -> dict[str, Any]:
        return batch_mturk_publish(batch=batch, by=by, progress=progress)

    def publish_check(self, *, batch: Batch) -> None:
        publish_check(batch)

    def requirements(self, *, batch: Batch) -> list[dict[str, Any]]:
        return qualification_requirements(batch, client=mturk_client())

    def arrive(self, *, batch: Batch, hit: Hit | None, params: Mapping[str, str]) -> Assignment:
        if hit is None or hit.batch_id != batch.pk or params.get("hitId") != hit_mturk_id(hit):
            raise ValidationError("No such MTurk HIT.")
        return mturk_assignment_start(
            hit=hit,
            assignment_id=params.get("assignmentId", ""),
            worker_id=params.get("workerId", ""),
        )

    def submit_check(self, *, assignment: Assignment) -> None:
        mturk_submit_check(assignment=assignment)

    def completion_url(self, *, assignment: Assignment, params: Mapping[str, str]) -> str:
        # the page posts the assignment id there from the worker's browser
        return f"{submit_to_checked(params.get('turkSubmitTo', ''))}/mturk/externalSubmit"

    def confirm(self) -> Counts:
        return mturk_submissions_confirm()

    def decisions_send(self) -> Counts:
        return mturk_reviews_send()

    def bonuses_send(self) -> Counts:
        return mturk_bonuses_send()

    def returns_sync(self) -> Counts:
        return mturk_returns_sync()

    def blocks_mirror(self) -> Counts:
        return mturk_blocks_sync()

    def reconcile(self) -> Counts:
        return mturk_reconcile()

    def sync(self) -> Counts:
        return {
            **sync_steps(self),
            **{f"qualifications_{k}": v for k, v in mturk_qualifications_sync().items()},
        }
