"""A worker's own summary: what they handed in, what was approved, what they earned."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import Count, Q, Sum

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
    # Earned is the worker's ledger (crowd.LedgerEntry), the one figure every page shows:
    # rewards booked when a HIT is approved, and bonuses. Pending is not earned yet.
    earned_cents: int  # rewards booked in the ledger (approved HITs)
    pending_cents: int  # rewards of HITs waiting for review
    bonus_cents: int  # bonuses booked in the ledger

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
    approved, _ = rows.get(Assignment.State.APPROVED, (0, 0))
    rejected, _ = rows.get(Assignment.State.REJECTED, (0, 0))
    ledger = LedgerEntry.objects.filter(worker=worker).aggregate(
        rewards=Sum("amount_cents", filter=Q(kind=LedgerEntry.Kind.REWARD), default=0),
        bonuses=Sum("amount_cents", filter=Q(kind=LedgerEntry.Kind.BONUS), default=0),
    )
    return WorkerSummary(
        submitted=submitted,
        approved=approved,
        rejected=rejected,
        earned_cents=ledger["rewards"],
        pending_cents=pending,
        bonus_cents=ledger["bonuses"],
    )
