"""A project's workers: who they are, their records in this project, blocks and unblocks."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import (
    Count,
    Q,
    QuerySet,
    Sum,
)
from django.utils import timezone

from annotation.models import Assignment
from core.models import Membership, Project, Role
from core.services import require_role
from crowd.models import (
    REVIEWERS,
    Block,
    LedgerEntry,
)


def project_workers(*, project: Project) -> QuerySet[Any]:
    """People a reviewer of the project may manage: its annotators, and anyone who has
    worked on its batches (a worker who left still has history and pay)."""
    annotators = Membership.objects.filter(project=project, role=Role.ANNOTATOR).values("user_id")
    worked = Assignment.objects.filter(hit__batch__project=project).values("worker_id")
    return get_user_model().objects.filter(Q(pk__in=annotators) | Q(pk__in=worked))


def worker_summaries(*, project: Project) -> list[dict[str, Any]]:
    """Per worker of the project: counts by state, approval rate, earnings, block."""
    workers = list(project_workers(project=project).select_related("profile").order_by("username"))
    counts: dict[int, dict[str, int]] = {}
    rows = (
        Assignment.objects.filter(hit__batch__project=project)
        .values_list("worker_id", "state")
        .annotate(n=Count("pk"))
    )
    for worker_id, state, n in rows:
        counts.setdefault(worker_id, {})[state] = n
    earned = dict(
        LedgerEntry.objects.filter(project=project)
        .values_list("worker_id")
        .annotate(total=Sum("amount_cents"))
        .values_list("worker_id", "total")
    )
    blocked = set(
        Block.objects.active().filter(project=project).values_list("worker_id", flat=True)
    )
    return [
        {
            "worker": worker,
            **_rates(counts.get(worker.pk, {})),
            "earned_cents": earned.get(worker.pk, 0),
            "blocked": worker.pk in blocked,
        }
        for worker in workers
    ]


def _rates(by_state: dict[str, int]) -> dict[str, Any]:
    approved = by_state.get(Assignment.State.APPROVED, 0)
    rejected = by_state.get(Assignment.State.REJECTED, 0)
    reviewed = approved + rejected
    return {
        "submitted": by_state.get(Assignment.State.SUBMITTED, 0),
        "approved": approved,
        "rejected": rejected,
        "released": sum(by_state.get(s, 0) for s in Assignment.RELEASED if s != "rejected"),
        "approval_percent": 100 * approved / reviewed if reviewed else None,
    }


def worker_summary(*, project: Project, worker: User) -> dict[str, Any]:
    by_state = dict(
        Assignment.objects.filter(hit__batch__project=project, worker=worker)
        .values_list("state")
        .annotate(n=Count("pk"))
        .values_list("state", "n")
    )
    money = LedgerEntry.objects.filter(project=project, worker=worker)
    totals = dict(
        money.values_list("kind").annotate(total=Sum("amount_cents")).values_list("kind", "total")
    )
    rewards = totals.get(LedgerEntry.Kind.REWARD, 0)
    bonuses = totals.get(LedgerEntry.Kind.BONUS, 0)
    return {
        **_rates(by_state),
        "rewards_cents": rewards,
        "bonuses_cents": bonuses,
        "earned_cents": rewards + bonuses,
    }


def worker_of_project_check(project: Project, worker: User) -> None:
    """ValidationError unless the worker annotates (or has annotated) in the project."""
    if not project_workers(project=project).filter(pk=worker.pk).exists():
        raise ValidationError(f"{worker} is not a worker of {project}.")


def worker_block(*, project: Project, worker: User, by: User, reason: str) -> Block:
    """Bars the worker from the project's HITs (hit_claim skips them, and a HIT they
    hold can no longer be submitted: it goes back to the pool) with the reason they are
    shown. Work already submitted stays in the review queue."""
    require_role(project, by, *REVIEWERS)
    worker_of_project_check(project, worker)
    reason = reason.strip()
    if not reason:
        raise ValidationError({"reason": "Say why: the worker is shown the reason."})
    block = Block(project=project, worker=worker, reason=reason, blocked_by=by)
    block.full_clean(validate_constraints=False)
    try:
        with transaction.atomic():
            block.save()
    except IntegrityError:
        raise ValidationError(f"{worker} is already blocked on {project}.") from None
    return block


def worker_unblock(*, project: Project, worker: User, by: User, reason: str = "") -> Block:
    require_role(project, by, *REVIEWERS)
    with transaction.atomic():
        block = (
            Block.objects.active()
            .select_for_update()
            .filter(project=project, worker=worker)
            .first()
        )
        if block is None:
            raise ValidationError(f"{worker} is not blocked on {project}.")
        block.lifted_at = timezone.now()
        block.lifted_by = by
        block.lift_reason = reason.strip()
        block.save(update_fields=["lifted_at", "lifted_by", "lift_reason"])
    return block
