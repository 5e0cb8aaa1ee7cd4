"""Money: bonuses, the ledger's totals and its CSV export."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import (
    Count,
    Q,
    Sum,
)

from annotation.models import Assignment, Batch, Platform, PlatformRef
from annotation.platforms import platform_currency
from core.models import Project, Role
from core.services import require_role
from core.text import SafeCsvWriter
from crowd.models import (
    REVIEWERS,
    LedgerEntry,
)
from crowd.services.workers import worker_of_project_check

MAX_BONUS_CENTS = 100_00  # a typo guard: $100 in one bonus


def bonus_pay(
    *,
    project: Project,
    worker: User,
    by: User,
    amount_cents: int,
    reason: str,
    idempotency_key: str,
    batch: Batch | None = None,
    assignment: Assignment | None = None,
) -> tuple[LedgerEntry, bool]:
    """Pays the worker a bonus for work in a batch (`batch`, or `assignment`'s), once per
    idempotency key: a repeated request (a form sent twice) returns the first bonus and
    False. A key reused for a different bonus is refused, and so is a bonus that would
    take the batch's bonuses past its `bonus_cap_cents`."""
    require_role(project, by, *REVIEWERS)
    worker_of_project_check(project, worker)
    reason = reason.strip()
    key = idempotency_key.strip()
    errors: dict[str, str] = {}
    if not 1 <= amount_cents <= MAX_BONUS_CENTS:
        errors["amount_cents"] = f"A bonus is 1¢ to {MAX_BONUS_CENTS // 100} dollars."
    if not reason:
        errors["reason"] = "Say why: the worker reads the reason."
    if not key or len(key) > 64:
        errors["idempotency_key"] = "The request needs an idempotency key of 1 to 64 characters."
    if assignment is not None and (
        assignment.worker_id != worker.pk or assignment.hit.batch.project_id != project.pk
    ):
        errors["assignment"] = f"Assignment #{assignment.pk} is not this worker's in {project}."
    elif assignment is not None:
        if batch is not None and batch.pk != assignment.hit.batch_id:
            errors["batch"] = f"Assignment #{assignment.pk} is not in batch {batch.name!r}."
        batch = assignment.hit.batch
    if batch is None:
        errors["batch"] = "Name the batch the bonus is for: each batch caps its bonuses."
    elif batch.project_id != project.pk:
        errors["batch"] = f"Batch #{batch.pk} is not in {project}."
    if errors:
        raise ValidationError(errors)
    assert batch is not None
    same = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.BONUS, idempotency_key=key)
    try:
        with transaction.atomic():
            # the batch's row lock serializes bonuses for it, so two at once cannot both
            # fit under the cap that only one fits under
            locked = Batch.objects.select_for_update().get(pk=batch.pk)
            first = same.first()
            if first is None:
                _bonus_cap_check(locked, amount_cents)
                entry = LedgerEntry.objects.create(
                    kind=LedgerEntry.Kind.BONUS,
                    platform=locked.platform,
                    currency=platform_currency(locked.platform),
                    project=project,
                    worker=worker,
                    batch=locked,
                    assignment=assignment,
                    amount_cents=amount_cents,
                    reason=reason,
                    paid_by=by,
                    idempotency_key=key,
                )
                return entry, True
    except IntegrityError:  # the same key, paid by a request that committed meanwhile
        first = same.first()
        if first is None:
            raise
    if (first.project_id, first.worker_id, first.amount_cents) != (
        project.pk,
        worker.pk,
        amount_cents,
    ):
        raise ValidationError("This idempotency key was already used for another bonus.")
    return first, False


def _bonus_cap_check(batch: Batch, amount_cents: int) -> None:
    paid = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.BONUS, batch=batch).aggregate(
        total=Sum("amount_cents", default=0)
    )["total"]
    if paid + amount_cents > batch.bonus_cap_cents:
        left = max(0, batch.bonus_cap_cents - paid)
        raise ValidationError(
            {
                "amount_cents": f"Batch {batch.name!r} caps bonuses at "
                f"${batch.bonus_cap_cents / 100:,.2f} in all; ${paid / 100:,.2f} is paid "
                f"already, so at most ${left / 100:,.2f} more (staff can raise the cap in "
                "the admin)."
            }
        )


def bonuses_paid_there(*, entries: Iterable[LedgerEntry]) -> dict[int, dict[str, Any]]:
    """How each bonus among `entries` paid through a crowd platform stands there (by
    entry pk): its reference on the platform ("" before the first try), whether the
    platform paid it, and the platform's answer when it last refused (tried again by its
    periodic job). Local bonuses are not listed."""
    bonuses = {
        e.pk: e.platform
        for e in entries
        if e.kind == LedgerEntry.Kind.BONUS and e.platform != Platform.LOCAL
    }
    found: dict[int, dict[str, Any]] = {
        pk: {"reference": "", "paid": False, "error": ""} for pk in bonuses
    }
    for ref in PlatformRef.objects.filter(
        kind=PlatformRef.Kind.PAYMENT, local_id__in=list(bonuses)
    ):
        if bonuses[ref.local_id] == ref.platform:
            found[ref.local_id] = {
                "reference": ref.external_id,
                "paid": ref.reported_at is not None,
                "error": ref.last_error,
            }
    return found


def ledger_totals(*, project: Project) -> dict[str, Any]:
    """Rewards and bonuses of the project per worker, per batch and per platform, in
    hundredths of each row's currency: one ledger holds several platforms' currencies
    (MTurk pays in dollars, Prolific in pounds), and amounts are never added across them;
    `by_currency` is the headline, one total per currency."""
    entries = LedgerEntry.objects.filter(project=project)

    def by(*fields: str) -> list[dict[str, Any]]:
        rows = (
            entries.values(*fields, "currency")
            .annotate(
                rewards=Sum("amount_cents", filter=Q(kind=LedgerEntry.Kind.REWARD), default=0),
                bonuses=Sum("amount_cents", filter=Q(kind=LedgerEntry.Kind.BONUS), default=0),
                n=Count("pk"),
            )
            .order_by(*fields, "currency")
        )
        return [{**row, "total": row["rewards"] + row["bonuses"]} for row in rows]

    per_platform = by("platform")
    by_currency: dict[str, int] = {}
    for row in per_platform:
        by_currency[row["currency"]] = by_currency.get(row["currency"], 0) + row["total"]
    return {
        "per_worker": by("worker__username"),
        "per_batch": by("batch__name"),
        "per_platform": per_platform,
        "by_currency": by_currency,
    }


CSV_HEADER = [
    "date",
    "kind",
    "worker",
    "batch_id",
    "batch",
    "assignment_id",
    "amount",  # in `currency`: one ledger, several platforms
    "reason",
    "paid_by",
    "currency",
    "platform",
]


def ledger_csv(*, project: Project, user: User) -> Iterable[str]:
    """The project's ledger as CSV lines (researchers only), oldest first."""
    require_role(project, user, Role.RESEARCHER)
    entries = (
        LedgerEntry.objects.filter(project=project)
        .select_related("worker", "batch", "paid_by")
        .order_by("created_at", "id")
    )
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer)  # every cell escaped for spreadsheets

    def line(row: list[Any]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(row)
        return buffer.getvalue()

    yield line(CSV_HEADER)
    for e in entries.iterator(chunk_size=2000):
        yield line(
            [
                e.created_at.isoformat(),
                e.kind,
                e.worker.get_username(),
                e.batch_id or "",
                e.batch.name if e.batch else "",
                e.assignment_id or "",
                f"{e.amount_cents / 100:.2f}",
                e.reason,
                e.paid_by.get_username() if e.paid_by else "",
                e.currency,
                e.platform,
            ]
        )
