"""The periodic job for Prolific: local blocks go to the project's blocklist group
(blocks.py), the review's decisions and bonuses go there through the API, places given up
there free their slots here, and the money is reconciled.

Prolific keeps each participant's submission; Earmark keeps the assignment the session
opened (PlatformRef kind assignment: its SESSION_ID). A decision is sent once Prolific has
the submission awaiting review (the participant came back with the completion code);
one Prolific already decided (its own auto-approval after 21 days) is not sent again.
Bonuses are set up and then paid (two calls); the set-up's id is kept before paying, so a
run cut short between them pays that same set-up next time, never a second one.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.utils import timezone

from annotation.models import Assignment, PlatformRef
from annotation.platforms import refs
from annotation.platforms.prolific.blocks import prolific_blocks_sync
from annotation.platforms.prolific.client import (
    PROLIFIC,
    Kind,
    ProlificClient,
    ProlificError,
    prolific_client,
)
from annotation.platforms.prolific.reconcile import prolific_reconcile
from annotation.platforms.slots import released_there
from crowd.models import LedgerEntry, Review

logger = logging.getLogger(__name__)

AWAITING_REVIEW = "AWAITING REVIEW"
DECIDED = ("APPROVED", "REJECTED")
GIVEN_UP = {"RETURNED": "returned", "TIMED-OUT": "timed out"}
# Earmark's reasons (crowd.RejectReason) as Prolific's rejection categories: each of
# AudioCaps' canned reasons is an instruction of the task the caption did not follow
REJECTION_CATEGORIES = {
    "speech": "FAILED_INSTRUCTIONS",
    "visual": "FAILED_INSTRUCTIONS",
    "hints": "FAILED_INSTRUCTIONS",
    "imaginative": "FAILED_INSTRUCTIONS",
    "tense": "FAILED_INSTRUCTIONS",
    "off_topic": "LOW_EFFORT",
    "": "OTHER",  # a platform's verdict, or no canned reason
}
MIN_MESSAGE_CHARS = 100  # Prolific refuses a shorter rejection message
MESSAGE_TAIL = (
    " Your captions were read by a reviewer, who found they did not follow the task's instructions."
)


def rejection_category(assignment: Assignment) -> str:
    review = Review.objects.filter(assignment=assignment).first()
    return REJECTION_CATEGORIES.get(review.reason if review else "", "OTHER")


def rejection_message(assignment: Assignment) -> str:
    message = (assignment.feedback or "Your submission was rejected.").strip()
    if len(message) < MIN_MESSAGE_CHARS:
        message += MESSAGE_TAIL
    return message


def _submission(client: ProlificClient, session: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.get(f"submissions/{session}/")
    except ProlificError as exc:
        logger.warning("Prolific did not say how submission %s stands: %s", session, exc)
        return None
    return found


def prolific_decisions_send(*, client: ProlificClient) -> dict[str, int]:
    """Approves or rejects on Prolific the submissions decided here and not sent yet."""
    decided = Assignment.objects.filter(
        state__in=[Assignment.State.APPROVED, Assignment.State.REJECTED]
    )
    pending = refs.refs(platform=PROLIFIC, kind=Kind.ASSIGNMENT).filter(
        reported_at__isnull=True, local_id__in=decided.values("pk")
    )
    counts = {"sent": 0, "waiting": 0, "refused": 0}
    for ref in pending.order_by("pk"):
        assignment = Assignment.objects.get(pk=ref.local_id)
        there = _submission(client, ref.external_id)
        status = there.get("status") if there else None
        if status == AWAITING_REVIEW:
            body: dict[str, Any] = {"action": "APPROVE"}
            if assignment.state == Assignment.State.REJECTED:
                body = {
                    "action": "REJECT",
                    "message": rejection_message(assignment),
                    "rejection_category": rejection_category(assignment),
                }
            try:
                client.post(f"submissions/{ref.external_id}/transition/", body)
            except ProlificError as exc:
                logger.warning("Prolific refused the decision on %s: %s", ref.external_id, exc)
                counts["refused"] += 1
                continue
        elif status in DECIDED:
            if status.lower() != assignment.state:
                logger.warning(
                    "Assignment #%s is %s here but %s on Prolific, where it stays so.",
                    assignment.pk,
                    assignment.state,
                    status,
                )
        else:  # still active there (no completion code yet), or Prolific did not answer
            counts["waiting"] += 1
            continue
        PlatformRef.objects.filter(pk=ref.pk).update(reported_at=timezone.now())
        counts["sent"] += 1
    return counts


def prolific_bonuses_send(*, client: ProlificClient) -> dict[str, int]:
    """Pays through Prolific each bonus of the ledger for a Prolific participant's work in
    a study, once."""
    counts = {"paid": 0, "refused": 0}
    participants = refs.refs(platform=PROLIFIC, kind=Kind.WORKER)
    studies = dict(
        refs.refs(platform=PROLIFIC, kind=Kind.BATCH).values_list("local_id", "external_id")
    )
    payments = refs.refs(platform=PROLIFIC, kind=Kind.PAYMENT)
    bonuses = (
        LedgerEntry.objects.filter(
            kind=LedgerEntry.Kind.BONUS,
            worker_id__in=participants.values("local_id"),
            batch_id__in=list(studies),
        )
        .exclude(pk__in=payments.filter(reported_at__isnull=False).values("local_id"))
        .order_by("pk")
    )
    pids = dict(participants.values_list("local_id", "external_id"))
    for entry in bonuses:
        assert entry.batch_id is not None  # filtered on the batches with a study
        payment = payments.filter(local_id=entry.pk).first()
        try:
            if payment is None:
                set_up = client.post(
                    "submissions/bonus-payments/",
                    {
                        "study_id": studies[entry.batch_id],
                        "csv_bonuses": f"{pids[entry.worker_id]},{entry.amount_cents / 100:.2f}",
                    },
                )
                payment = PlatformRef.objects.create(
                    platform=PROLIFIC,
                    kind=Kind.PAYMENT,
                    local_id=entry.pk,
                    external_id=set_up["id"],
                )
            client.post(f"bulk-bonus-payments/{payment.external_id}/pay/")
        except ProlificError as exc:
            logger.warning("Prolific refused bonus #%s: %s", entry.pk, exc)
            if payment is not None:  # shown on the ledger page until a later run pays it
                PlatformRef.objects.filter(pk=payment.pk).update(last_error=str(exc)[:2000])
            counts["refused"] += 1
            continue
        PlatformRef.objects.filter(pk=payment.pk).update(reported_at=timezone.now(), last_error="")
        counts["paid"] += 1
    return counts


def prolific_returns_sync(*, client: ProlificClient, now: datetime | None = None) -> dict[str, int]:
    """Frees the slots of places returned or timed out on Prolific."""
    now = now or timezone.now()
    accepted = Assignment.objects.filter(state=Assignment.State.ACCEPTED)
    open_there = refs.refs(platform=PROLIFIC, kind=Kind.ASSIGNMENT).filter(
        local_id__in=accepted.values("pk")
    )
    counts = {"released": 0, "failed": 0}
    for ref in open_there.order_by("pk"):
        there = _submission(client, ref.external_id)
        if there is None:
            counts["failed"] += 1
            continue
        if there.get("status") in GIVEN_UP:
            counts["released"] += released_there(Assignment.objects.get(pk=ref.local_id), now)
    return counts


def prolific_sync(*, client: ProlificClient | None = None) -> dict[str, int]:
    """The periodic job (the beat's prolific-sync and `manage.py prolific_sync`); nothing to
    do, and no client made, while no batch is on Prolific."""
    if not refs.refs(platform=PROLIFIC, kind=Kind.BATCH).exists():
        return {}
    client = client or prolific_client()
    # blocks first, so a participant blocked here no longer sees the project's studies;
    # decisions and bonuses next, so the reconciliation compares what was meant to be sent
    return {
        **{f"blocks_{k}": v for k, v in prolific_blocks_sync(client=client).items()},
        **{f"decisions_{k}": v for k, v in prolific_decisions_send(client=client).items()},
        **{f"bonuses_{k}": v for k, v in prolific_bonuses_send(client=client).items()},
        **{f"returns_{k}": v for k, v in prolific_returns_sync(client=client).items()},
        **{f"money_{k}": v for k, v in prolific_reconcile(client=client).items()},
    }
