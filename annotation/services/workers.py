"""A worker's own summary: what they handed in, what was approved, what they earned."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import Count, Sum

from annotation.models import (
    Assignment,
)
from crowd.models import LedgerEntry

# what a worker has handed in: their record counts these
REVIEW_STATES = (
    Assignment.State.SUBMITTED,
    Assignment.State.APPROVED,
    Assignment.State.REJECTED,
)


@dataclass(frozen=True)
class WorkerSummary:
    """A worker's own record, for their pages: never shown to anyone else."""

    submitted: int  # waiting for review
    approved: int
    rejected: int
    earned_cents: int  # rewards of approved HITs
    pending_cents: int  # rewards of HITs waiting for review
    bonus_cents: int  # bonuses paid (crowd.LedgerEntry)

    @property
    def approval_percent(self) -> float | None:
        reviewed = self.approved + self.rejected
        return 100 * self.approved / reviewed if reviewed else None

    @property
    def total_cents(self) -> int:
        return self.earned_cents + self.bonus_cents


def worker_summary(*, worker: User) -> WorkerSummary:
    rows = {
        state: (n, cents or 0)
        for state, n, cents in Assignment.objects.filter(
            worker=worker, state__in=[s.value for s in REVIEW_STATES]
        )
        .values_list("state")
        .annotate(n=Count("id"), cents=Sum("hit__batch__reward_cents"))
        .values_list("state", "n", "cents")
    }
    submitted, pending = rows.get(Assignment.State.SUBMITTED, (0, 0))
    approved, earned = rows.get(Assignment.State.APPROVED, (0, 0))
    rejected, _ = rows.get(Assignment.State.REJECTED, (0, 0))
    bonuses = LedgerEntry.objects.filter(worker=worker, kind=LedgerEntry.Kind.BONUS).aggregate(
        cents=Sum("amount_cents")
    )
    return WorkerSummary(
        submitted=submitted,
        approved=approved,
        rejected=rejected,
        earned_cents=earned,
        pending_cents=pending,
        bonus_cents=bonuses["cents"] or 0,
    )
