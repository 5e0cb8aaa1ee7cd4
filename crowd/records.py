"""Rows written inside annotation's own transactions: the review of an assignment and,
for an approval, the worker's reward. annotation.services calls these, so they import
nothing from it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from annotation.models import Assignment
from crowd.models import LedgerEntry, Review


def review_record(
    *,
    assignment: Assignment,
    reviewer: Any | None,
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
