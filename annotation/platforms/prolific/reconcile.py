"""The ledger against Prolific's own records, each run of the periodic job (sync.py).

For each study: every submission Prolific has approved (so paid) must be a reward in the
ledger, and every reward or rejection here that went to Prolific must stand there the same
way; every bonus in the ledger for a Prolific participant must have been paid there. What
differs is written as crowd.LedgerDiscrepancy rows (discrepancies.py: each difference once,
kept while it stands) and listed on the ledger page.
"""

from __future__ import annotations

import logging
from typing import Any

from annotation.models import Assignment, Batch, Platform
from annotation.platforms import refs
from annotation.platforms.discrepancies import discrepancies_record
from annotation.platforms.prolific.client import (
    PROLIFIC,
    Kind,
    ProlificClient,
    ProlificError,
)
from crowd.models import LedgerDiscrepancy, LedgerEntry

logger = logging.getLogger(__name__)


def _there(client: ProlificClient, study: str) -> dict[str, str]:
    """Each of the study's submissions on Prolific: session id -> status."""
    statuses: dict[str, str] = {}
    page: dict[str, Any] = client.get(f"studies/{study}/submissions/")
    while True:
        statuses.update({s["id"]: s["status"] for s in page.get("results", [])})
        following = (page.get("_links") or {}).get("next", {}) or {}
        if not following.get("href"):
            return statuses
        page = client.call("GET", following["href"].split("/api/v1/", 1)[-1])


def _study_problems(batch: Batch, study: str, there: dict[str, str]) -> list[LedgerDiscrepancy]:
    sessions = dict(
        refs.refs(platform=PROLIFIC, kind=Kind.ASSIGNMENT)
        .filter(local_id__in=Assignment.objects.filter(hit__batch=batch).values("pk"))
        .values_list("external_id", "local_id")
    )
    reported = set(
        refs.refs(platform=PROLIFIC, kind=Kind.ASSIGNMENT)
        .filter(local_id__in=sessions.values(), reported_at__isnull=False)
        .values_list("local_id", flat=True)
    )
    rewards = {
        e.assignment_id: e
        for e in LedgerEntry.objects.filter(kind=LedgerEntry.Kind.REWARD, batch=batch)
    }
    states = dict(Assignment.objects.filter(pk__in=sessions.values()).values_list("pk", "state"))
    found = []

    def problem(text: str, assignment_id: int | None) -> None:
        found.append(
            LedgerDiscrepancy(
                project_id=batch.project_id,
                platform=Platform.PROLIFIC,
                assignment_id=assignment_id,
                entry=rewards.get(assignment_id),
                problem=f"Study {study}: {text}",
            )
        )

    for session, status in sorted(there.items()):
        local = sessions.get(session)
        if status == "APPROVED" and (local is None or local not in rewards):
            problem(
                f"submission {session} is approved (paid) on Prolific, with no reward in "
                "the ledger.",
                local,
            )
    for session, local in sorted(sessions.items()):
        if local not in reported:
            continue  # the decision has not gone there yet: not a difference, a delay
        wanted = {"approved": "APPROVED", "rejected": "REJECTED"}.get(states.get(local, ""))
        status = there.get(session, "missing")
        if wanted and status != wanted:
            problem(
                f"assignment #{local} is {states[local]} here but {status.lower()} on Prolific "
                f"(submission {session}).",
                local,
            )
    return found


def _bonus_problems() -> list[LedgerDiscrepancy]:
    participants = refs.refs(platform=PROLIFIC, kind=Kind.WORKER).values("local_id")
    paid = refs.refs(platform=PROLIFIC, kind=Kind.PAYMENT).filter(reported_at__isnull=False)
    unpaid = (
        LedgerEntry.objects.filter(kind=LedgerEntry.Kind.BONUS, worker_id__in=participants)
        .exclude(pk__in=paid.values("local_id"))
        .select_related("worker")
    )
    return [
        LedgerDiscrepancy(
            project_id=entry.project_id,
            platform=Platform.PROLIFIC,
            entry=entry,
            assignment_id=entry.assignment_id,
            problem=f"bonus #{entry.pk} of {entry.amount_cents / 100:.2f} {entry.currency} to "
            f"{entry.worker.get_username()} is in the ledger but not paid on Prolific.",
        )
        for entry in unpaid
    ]


def prolific_reconcile(*, client: ProlificClient) -> dict[str, int]:
    """Compares the ledger with Prolific and makes Prolific's discrepancies what differs
    now. A study Prolific does not list is counted as failed and its earlier
    discrepancies are kept."""
    studies = dict(
        refs.refs(platform=PROLIFIC, kind=Kind.BATCH).values_list("local_id", "external_id")
    )
    found: list[LedgerDiscrepancy] = []
    failed: set[int] = set()
    for batch in Batch.objects.filter(pk__in=list(studies)).order_by("pk"):
        try:
            there = _there(client, studies[batch.pk])
        except ProlificError as exc:
            logger.warning("Prolific did not list study %s: %s", studies[batch.pk], exc)
            failed.add(batch.project_id)
            continue
        found.extend(_study_problems(batch, studies[batch.pk], there))
    found.extend(_bonus_problems())
    standing = discrepancies_record(platform=Platform.PROLIFIC, found=found, unchecked=failed)
    return {"discrepancies": standing, "failed": len(failed)}
