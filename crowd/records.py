"""Rows other apps write into crowd's tables inside their own transactions: the review of
an assignment and, for an approval, the worker's reward (annotation.services), a batch's
requirements written with the batch (annotation.services.batch_publish), and a caption's
flag (active's disagreement checks). They import only models, so the apps below
crowd.services can call them without importing it back."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django_countries import countries

from annotation.models import Assignment, Batch, Caption
from annotation.platforms import platform_currency
from crowd.models import (
    BatchRequirements,
    Flag,
    LedgerEntry,
    Qualification,
    RequiredLocale,
    Review,
)


@dataclass(frozen=True)
class Requirements:
    """Who may take a batch's HITs (crowd.models.BatchRequirements): nothing asked by
    default."""

    qualifications: tuple[Qualification, ...] = ()
    min_approval_percent: int = 0
    min_approved: int = 0
    site_wide_record: bool = False
    locales: tuple[str, ...] = ()  # ISO 3166-1 alpha-2 codes; none: every country

    def asks_anything(self) -> bool:
        return bool(
            self.qualifications
            or self.min_approval_percent
            or self.min_approved
            or self.site_wide_record
            or self.locales
        )


def locale_codes(raw: Iterable[str]) -> tuple[str, ...]:
    """Country codes as given (any case, blanks ignored), checked, uppercased, sorted, each
    once; a ValidationError on `locales` names every code that is not ISO 3166's."""
    codes = sorted({code.strip().upper() for code in raw if code.strip()})
    if unknown := [code for code in codes if code not in countries]:
        raise ValidationError(
            {"locales": f"{', '.join(unknown)}: not ISO 3166 country codes (AU, CA, GB, …)."}
        )
    return tuple(codes)


def requirements_record(*, batch: Batch, requirements: Requirements) -> BatchRequirements:
    """Replaces the batch's requirements, inside the caller's transaction; the caller has
    checked who may set them."""
    qualifications = list(requirements.qualifications)
    if foreign := [q.name for q in qualifications if q.project_id != batch.project_id]:
        raise ValidationError({"qualifications": f"{foreign} belong to another project."})
    if not 0 <= requirements.min_approval_percent <= 100:
        raise ValidationError({"min_approval_percent": "Give a percentage from 0 to 100."})
    if requirements.min_approved < 0:
        raise ValidationError({"min_approved": "Give a count of 0 or more."})
    codes = locale_codes(requirements.locales)
    row, _ = BatchRequirements.objects.update_or_create(
        batch=batch,
        defaults={
            "min_approval_percent": requirements.min_approval_percent,
            "min_approved": requirements.min_approved,
            "site_wide_record": requirements.site_wide_record,
        },
    )
    row.qualifications.set(qualifications)
    row.locales.exclude(country__in=codes).delete()
    RequiredLocale.objects.bulk_create(
        [RequiredLocale(requirements=row, country=code) for code in codes],
        ignore_conflicts=True,
    )
    return row


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
    the batch's reward. `reviewer` None is the batch's auto-approval, or for a rejection
    a crowd platform's verdict (annotation.platforms: work under a claimed id)."""
    review = Review(
        assignment=assignment,
        decision=Review.Decision.APPROVED if approve else Review.Decision.REJECTED,
        reason=reason,
        feedback=feedback,
        reviewer=reviewer,
        automatic=reviewer is None and approve,
        created_at=now,
    )
    review.full_clean(exclude=["assignment"])
    review.save()
    if approve:
        batch = assignment.hit.batch
        LedgerEntry.objects.create(
            kind=LedgerEntry.Kind.REWARD,
            platform=batch.platform,
            currency=platform_currency(batch.platform),
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
