"""Reads shared by the claim path and the crowd pages.

hits_open_to() is the gate hit_claim applies: it only narrows the claim query with
uncorrelated subqueries (the worker's record is computed once per query, not per HIT), so
a claim stays one SELECT … FOR UPDATE SKIP LOCKED.
"""

from __future__ import annotations

from datetime import datetime
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
from django.utils import timezone
from django_countries import countries

from annotation.models import Assignment, Batch, Hit, Platform
from core.models import Membership, Profile, Project, Role
from crowd.models import BatchRequirements, Block, QualificationAttempt, RequiredLocale


def _count(assignments: QuerySet[Assignment]) -> Coalesce:
    counted = assignments.order_by().values("worker").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


REVIEWED = (Assignment.State.APPROVED, Assignment.State.REJECTED)


def requirements_unmet(*, worker: User | int) -> QuerySet[BatchRequirements]:
    """Requirements the worker falls short of: a qualification not passed, too few
    approved assignments, an approval rate below the minimum (a worker with nothing
    reviewed yet has 100 %), or locales that do not include the country the worker
    declared (or they declared none). The record is the worker's in the batch's project,
    or over every project where the requirements ask for the site-wide record."""
    mine = Assignment.objects.filter(worker=worker)
    # correlated with the requirement's row (one per gated batch), never with the HITs
    here = mine.filter(hit__batch__project_id=OuterRef("batch__project_id"))
    passed = QualificationAttempt.objects.filter(
        worker=worker, state=QualificationAttempt.State.APPROVED
    ).values("qualification_id")
    missing = BatchRequirements.qualifications.through.objects.exclude(
        qualification_id__in=passed
    ).values("batchrequirements_id")
    # the worker's country is read in SQL, from the worker's id: the claim query is
    # compiled once with a stand-in for it (annotation.services.assignments._claim_sql)
    declared = Profile.objects.filter(user=worker).exclude(country="").values("country")
    limited = RequiredLocale.objects.values("requirements_id")
    admitted = RequiredLocale.objects.filter(country__in=declared).values("requirements_id")
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
        .filter(
            Q(min_approved__gt=F("approved"))
            | Q(wanted__gt=F("scored"))
            | Q(pk__in=missing)
            | (Q(pk__in=limited) & ~Q(pk__in=admitted))
        )
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


def _country_name(code: str) -> str:
    return str(countries.name(code)) or code


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def requirements_refusals(
    *, worker: User, batch: Batch | None = None, now: datetime | None = None, limit: int = 10
) -> list[str]:
    """Why the worker is not offered open batches of their projects (or `batch`): one
    line per batch whose requirements they miss, naming each unmet requirement and the
    worker's own figure, for the work page and the API's refusals."""
    now = now or timezone.now()
    annotated = Membership.objects.filter(user=worker, role=Role.ANNOTATOR).values("project_id")
    unmet = (
        requirements_unmet(worker=worker)
        .filter(
            batch__state=Batch.State.PUBLISHED,
            batch__expires_at__gt=now,
            batch__project__in=annotated,
            batch__platform=Platform.LOCAL,
        )
        .select_related("batch__project")
        .prefetch_related("qualifications", "locales")
        .order_by("batch__name", "batch_id")
    )
    if batch is not None:
        unmet = unmet.filter(batch=batch)
    passed = set(
        QualificationAttempt.objects.filter(
            worker=worker, state=QualificationAttempt.State.APPROVED
        ).values_list("qualification_id", flat=True)
    )
    country = Profile.objects.filter(user=worker).values_list("country", flat=True).first() or ""
    lines = []
    for requirements in unmet[:limit]:
        record = worker_record(
            worker=worker,
            project=None if requirements.site_wide_record else requirements.batch.project,
        )
        where = "in every project" if requirements.site_wide_record else "in this project"
        reasons = []
        locales = [str(locale.country) for locale in requirements.locales.all()]
        if locales and country not in locales:
            wanted = _either([_country_name(code) for code in locales])
            reasons.append(
                f"it is open only to workers in {wanted}, and your account "
                + (
                    f"says {_country_name(country)}"
                    if country
                    else "names no country (declare it on your account page)"
                )
            )
        if record["approval_percent"] < requirements.min_approval_percent:
            reasons.append(
                f"it needs at least {requirements.min_approval_percent} % of your reviewed "
                f"HITs approved {where}; yours: {record['approval_percent']:.1f} %"
            )
        if record["approved"] < requirements.min_approved:
            reasons.append(
                f"it needs at least {requirements.min_approved:,} approved HITs {where}; "
                f"you have {record['approved']:,}"
            )
        if missing := [q.name for q in requirements.qualifications.all() if q.pk not in passed]:
            reasons.append(f"it needs the qualification test {_either(missing)} passed")
        lines.append(
            f"{requirements.batch.name} ({requirements.batch.project.name}): "
            + "; ".join(reasons)
            + "."
        )
    return lines
