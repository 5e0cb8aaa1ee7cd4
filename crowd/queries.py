"""Reads shared by the claim path and the crowd pages.

hits_open_to() is the gate hit_claim applies: it only narrows the claim query with
uncorrelated subqueries (the worker's record is computed once per query, not per HIT), so
a claim stays one SELECT … FOR UPDATE SKIP LOCKED.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import (
    Case,
    Count,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from annotation.models import Assignment, Hit
from core.models import Membership, Project, Role
from crowd.models import BatchRequirements, Block, QualificationAttempt


def _count(assignments: QuerySet[Assignment]) -> Coalesce:
    counted = assignments.order_by().values("worker").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


REVIEWED = (Assignment.State.APPROVED, Assignment.State.REJECTED)


def requirements_unmet(*, worker: User | int) -> QuerySet[BatchRequirements]:
    """Requirements the worker falls short of: a qualification not passed, too few
    approved assignments, or an approval rate below the minimum (a worker with nothing
    reviewed yet has 100 %). The record is the worker's in the batch's project, or over
    every project where the requirements ask for the site-wide record."""
    mine = Assignment.objects.filter(worker=worker)
    # correlated with the requirement's row (one per gated batch), never with the HITs
    here = mine.filter(hit__batch__project_id=OuterRef("batch__project_id"))
    passed = QualificationAttempt.objects.filter(
        worker=worker, state=QualificationAttempt.State.APPROVED
    ).values("qualification_id")
    missing = BatchRequirements.qualifications.through.objects.exclude(
        qualification_id__in=passed
    ).values("batchrequirements_id")
    site_wide = Q(site_wide_record=True)
    return (
        BatchRequirements.objects.alias(
            approved_anywhere=_count(mine.filter(state=Assignment.State.APPROVED)),
            reviewed_anywhere=_count(mine.filter(state__in=REVIEWED)),
            approved_here=_count(here.filter(state=Assignment.State.APPROVED)),
            reviewed_here=_count(here.filter(state__in=REVIEWED)),
        )
        .alias(
            approved=Case(When(site_wide, then=F("approved_anywhere")), default=F("approved_here")),
            reviewed=Case(When(site_wide, then=F("reviewed_anywhere")), default=F("reviewed_here")),
        )
        .alias(
            # approved / reviewed < min percent, without a division (nothing reviewed: 100 %)
            wanted=F("min_approval_percent") * F("reviewed"),
            scored=F("approved") * 100,
        )
        .filter(Q(min_approved__gt=F("approved")) | Q(wanted__gt=F("scored")) | Q(pk__in=missing))
    )


def hits_open_to(hits: QuerySet[Hit], *, worker: User | int) -> QuerySet[Hit]:
    """Narrows `hits` to those the worker may claim: no active block on the batch's
    project, and every requirement of the batch met."""
    blocked = Block.objects.active().filter(worker=worker).values("project_id")
    unmet = requirements_unmet(worker=worker).values("batch_id")
    return hits.exclude(batch__project_id__in=blocked).exclude(batch_id__in=unmet)


def worker_record(*, worker: User, project: Project | None = None) -> dict[str, Any]:
    """The worker's record in `project`, as a batch's requirements there read it, or over
    every project (None: for the worker's own pages and site-wide requirements)."""
    reviewed_rows = Assignment.objects.filter(worker=worker, state__in=REVIEWED)
    if project is not None:
        reviewed_rows = reviewed_rows.filter(hit__batch__project=project)
    counts = dict(
        reviewed_rows.values_list("state").annotate(n=Count("pk")).values_list("state", "n")
    )
    approved = counts.get(Assignment.State.APPROVED, 0)
    reviewed = approved + counts.get(Assignment.State.REJECTED, 0)
    return {
        "approved": approved,
        "rejected": reviewed - approved,
        "reviewed": reviewed,
        "approval_percent": (100 * approved / reviewed) if reviewed else 100.0,
    }


def blocks_of(*, worker: User) -> QuerySet[Block]:
    return Block.objects.active().filter(worker=worker).select_related("project")


def blocked_everywhere(*, worker: User) -> bool:
    """Whether every project the worker annotates has blocked them (the block page)."""
    projects = set(
        Membership.objects.filter(user=worker, role=Role.ANNOTATOR).values_list(
            "project_id", flat=True
        )
    )
    blocked = set(Block.objects.active().filter(worker=worker).values_list("project_id", flat=True))
    return bool(projects) and projects <= blocked
