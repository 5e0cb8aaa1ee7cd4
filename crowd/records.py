"""Rows other apps write into crowd's tables inside their own transactions: the review of
an assignment and, for an approval, the worker's reward (annotation.services), and a
caption's flag (active's disagreement checks). They import only models, so the apps below
crowd.services can call them without importing it back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

from annotation.models import Assignment, Caption
from crowd.models import Flag, LedgerEntry, Review


def review_record(
    *,
    assignment: Assignment,
    reviewer: User | None,
    approve: bool,
    reason: str,
    feedback: str,
    now: datetime,
) -> Review:
    """Stores the decision on a locked, just-reviewed assignment; an approval also books
    the batch's reward. `reviewer` None is the batch's auto-approval."""
    review = Review(
        assignment=assignment,
        decision=Review.Decision.APPROVED if approve else Review.Decision.REJECTED,
        reason=reason,
        feedback=feedback,
        reviewer=reviewer,
        automatic=reviewer is None,
        created_at=now,
    )
    review.full_clean(exclude=["assignment"])
    review.save()
    if approve:
        batch = assignment.hit.batch
        LedgerEntry.objects.create(
            kind=LedgerEntry.Kind.REWARD,
            project_id=batch.project_id,
            worker_id=assignment.worker_id,
            batch=batch,
            assignment=assignment,
            amount_cents=batch.reward_cents,
            created_at=now,
        )
    return review


def flag_create(*, caption: Caption, reason: str, evidence: dict[str, Any] | None = None) -> Flag:
    """Puts a caption's assignment at the front of the review queue (the hook the
    active-learning loop fills)."""
    flag = Flag(caption=caption, reason=reason.strip(), evidence=evidence or {})
    flag.full_clean()
    flag.save()
    return flag
