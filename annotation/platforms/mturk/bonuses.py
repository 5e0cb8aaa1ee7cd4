"""The ledger's bonuses paid on MTurk with SendBonus.

A bonus for an MTurk worker's work (crowd.services.bonus_pay, LedgerEntry kind bonus on
an MTurk batch) is paid by the periodic job: SendBonus on the worker's assignment the
entry names, or else their latest assignment in the bonus's batch that MTurk confirmed as
theirs (MTurk pays a bonus only on an assignment of that worker's). Each entry's
PlatformRef (kind payment) holds its UniqueRequestToken, derived from the ledger row and
written before the first call: a call whose answer was lost is repeated with the same
token, which MTurk pays once; and since MTurk keeps a token for 24 hours only, a retry
first looks for the payment in ListBonusPayments (the reason ends with the entry's
number, "(Earmark bonus #12)"). A refused call keeps MTurk's answer on the ref
(last_error, shown on the ledger page) and is tried again on the next run. MTurk pays US
dollars: a bonus in another currency is refused, never converted.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from django.utils import timezone

from annotation.models import Assignment, MTurkWorker, PlatformRef
from annotation.platforms import refs
from annotation.platforms.mturk.client import MTURK, Kind, mturk_client, mturk_error
from crowd.models import LedgerEntry

MARKER = re.compile(r"\(Earmark bonus #(\d+)\)\s*$")
MAX_REASON_CHARS = 4000

logger = logging.getLogger(__name__)


def bonus_token(entry: LedgerEntry) -> str:
    """The entry's UniqueRequestToken (at most 64 characters): the same for every try."""
    digest = hashlib.sha256(f"{entry.pk}:{entry.idempotency_key}".encode()).hexdigest()
    return f"earmark-bonus-{entry.pk}-{digest[:32]}"


def bonus_reason(entry: LedgerEntry) -> str:
    """What the worker reads, ending with the entry's number (reconcile.py matches it)."""
    tail = f" (Earmark bonus #{entry.pk})"
    return entry.reason[: MAX_REASON_CHARS - len(tail)] + tail


def bonus_entry_id(reason: str) -> int | None:
    """The ledger entry a bonus payment on MTurk was sent for, from its reason."""
    found = MARKER.search(reason or "")
    return int(found.group(1)) if found else None


def mturk_bonuses_unpaid() -> Any:
    """Bonuses for MTurk work the ledger holds that have not reached MTurk."""
    paid = refs.refs(platform=MTURK, kind=Kind.PAYMENT).filter(reported_at__isnull=False)
    return LedgerEntry.objects.filter(kind=LedgerEntry.Kind.BONUS, platform=MTURK).exclude(
        pk__in=paid.values("local_id")
    )


def _paid_on(entry: LedgerEntry) -> tuple[str, str]:
    """(AssignmentId, WorkerId) on MTurk to pay the bonus on; ValueError saying why not."""
    owner = MTurkWorker.objects.filter(user_id=entry.worker_id).first()
    if owner is None:
        raise ValueError(f"{entry.worker} has no MTurk worker id.")
    if entry.batch_id is None:
        raise ValueError("The bonus names no batch, so no MTurk assignment to pay it on.")
    mine = Assignment.objects.filter(worker_id=entry.worker_id)
    mine = mine.filter(pk=entry.assignment_id) if entry.assignment_id else mine
    confirmed = (
        refs.refs(platform=MTURK, kind=Kind.ASSIGNMENT)
        .filter(
            confirmed_at__isnull=False,
            local_id__in=mine.filter(hit__batch_id=entry.batch_id).values("pk"),
        )
        .order_by("-confirmed_at", "-pk")
        .first()
    )
    if confirmed is None:
        raise ValueError(
            "MTurk has confirmed no assignment of this worker's in the batch to pay it on yet."
        )
    return confirmed.external_id, owner.worker_id


def _already_paid(client: Any, assignment_id: str, entry: LedgerEntry) -> bool:
    kwargs: dict[str, Any] = {"AssignmentId": assignment_id, "MaxResults": 100}
    while True:
        page = client.list_bonus_payments(**kwargs)
        if any(bonus_entry_id(p.get("Reason", "")) == entry.pk for p in page["BonusPayments"]):
            return True
        if not page.get("NextToken") or not page.get("BonusPayments"):
            return False
        kwargs["NextToken"] = page["NextToken"]


def _refused(ref: PlatformRef, entry: LedgerEntry, why: str) -> None:
    logger.warning("MTurk bonus #%s not paid: %s", entry.pk, why)
    PlatformRef.objects.filter(pk=ref.pk).update(last_error=why[:2000])


def mturk_bonuses_send(*, client: Any = None) -> dict[str, int]:
    """Pays on MTurk each bonus of the ledger for MTurk work not paid there yet, once.
    Returns how many were paid and refused (each refused one is tried again next run)."""
    counts = {"paid": 0, "refused": 0}
    unpaid = list(mturk_bonuses_unpaid().select_related("worker").order_by("pk"))
    if not unpaid:
        return counts
    client = client or mturk_client()
    for entry in unpaid:
        ref, created = PlatformRef.objects.get_or_create(
            platform=MTURK,
            kind=Kind.PAYMENT,
            local_id=entry.pk,
            defaults={"external_id": bonus_token(entry)},
        )
        try:
            if entry.currency != "USD":
                raise ValueError(f"MTurk pays US dollars; this bonus is in {entry.currency}.")
            assignment_id, worker_id = _paid_on(entry)
            if created or not _already_paid(client, assignment_id, entry):
                client.send_bonus(
                    WorkerId=worker_id,
                    BonusAmount=f"{entry.amount_cents / 100:.2f}",
                    AssignmentId=assignment_id,
                    Reason=bonus_reason(entry),
                    UniqueRequestToken=ref.external_id,
                )
        except (ClientError, BotoCoreError) as exc:
            _refused(ref, entry, mturk_error(exc))
            counts["refused"] += 1
            continue
        except ValueError as exc:
            _refused(ref, entry, str(exc))
            counts["refused"] += 1
            continue
        PlatformRef.objects.filter(pk=ref.pk).update(reported_at=timezone.now(), last_error="")
        counts["paid"] += 1
    return counts
