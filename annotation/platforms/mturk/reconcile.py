"""The ledger against MTurk's own records, each run of the periodic job (platform.sync,
after the decisions and bonuses went out).

For each HIT on MTurk, ListAssignmentsForHIT and ListBonusPayments give MTurk's account
of it. Every difference is a crowd.LedgerDiscrepancy, listed on the ledger page:
- an assignment MTurk lists that is not known here (or on another HIT here);
- an assignment MTurk has as another worker's than here;
- an assignment MTurk approved (so paid) with no reward in the ledger, or one rewarded
  here that MTurk rejected (so paid nothing);
- a decision sent to MTurk that MTurk holds otherwise, and work confirmed on MTurk (not
  rejected) that MTurk no longer lists;
- a bonus paid on MTurk that is not in the ledger, one paid more than once, or paid for
  another amount or worker than the ledger's; a bonus in the ledger MTurk does not list
  (not paid yet, see bonuses.py, or sent and lost).
Each difference is recorded once and stays listed while it stands (discrepancies.py); a
project whose HITs MTurk did not answer for keeps its earlier rows. MTurk keeps records
for 120 days after a HIT is disposed of: older HITs read as missing there.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from annotation.models import Assignment, Hit
from annotation.platforms import refs
from annotation.platforms.discrepancies import discrepancies_record
from annotation.platforms.mturk.bonuses import bonus_entry_id
from annotation.platforms.mturk.client import MTURK, Kind, mturk_client, mturk_error, mturk_hits
from crowd.models import LedgerDiscrepancy, LedgerEntry

logger = logging.getLogger(__name__)
DECIDED = (Assignment.State.APPROVED, Assignment.State.REJECTED)


def _pages(call: Any, key: str, **kwargs: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    kwargs["MaxResults"] = 100
    while True:
        page = call(**kwargs)
        found.extend(page.get(key, []))
        if not page.get("NextToken") or not page.get(key):
            return found
        kwargs["NextToken"] = page["NextToken"]


class _Here:
    """What the ledger and the refs say about MTurk work, read once per run."""

    def __init__(self) -> None:
        self.refs = {r.external_id: r for r in refs.refs(platform=MTURK, kind=Kind.ASSIGNMENT)}
        assignments = Assignment.objects.filter(
            pk__in=[r.local_id for r in self.refs.values()]
        ).select_related("worker__mturk_worker")
        self.assignments = {a.pk: a for a in assignments}
        self.by_hit: dict[int, list[Assignment]] = defaultdict(list)
        for assignment in self.assignments.values():
            self.by_hit[assignment.hit_id].append(assignment)
        self.ext = {r.local_id: r for r in self.refs.values()}
        self.rewards = dict(
            LedgerEntry.objects.filter(
                kind=LedgerEntry.Kind.REWARD, assignment_id__in=list(self.assignments)
            ).values_list("assignment_id", "pk")
        )


def _worker_id(assignment: Assignment) -> str | None:
    owner = getattr(assignment.worker, "mturk_worker", None)
    return owner.worker_id if owner is not None else None


def _hit_problems(hit: Hit, there: list[dict[str, Any]], here: _Here) -> list[LedgerDiscrepancy]:
    found: list[LedgerDiscrepancy] = []
    project = hit.batch.project_id

    def problem(text: str, assignment: Assignment | None = None) -> None:
        pk = assignment.pk if assignment is not None else None
        found.append(
            LedgerDiscrepancy(
                project_id=project,
                platform=MTURK,
                assignment_id=pk,
                entry_id=here.rewards.get(pk) if pk is not None else None,
                problem=text,
            )
        )

    listed: set[int] = set()
    for item in there:
        there_id, status = item["AssignmentId"], item["AssignmentStatus"]
        ref = here.refs.get(there_id)
        assignment = here.assignments.get(ref.local_id) if ref is not None else None
        if assignment is None or assignment.hit_id != hit.pk:
            paid = ": MTurk paid its reward, the ledger has none" if status == "Approved" else ""
            problem(
                f"MTurk's assignment {there_id} on HIT {item.get('HITId')} (worker "
                f"{item.get('WorkerId')}, {status.lower()}) is not one of this HIT's here{paid}."
            )
            continue
        listed.add(assignment.pk)
        name = f"assignment #{assignment.pk} ({there_id})"
        # work rejected on both sides under another worker's id is confirm.py's impostor
        # case, settled there (rejected, the real worker blocked): no money differs
        both_rejected = status == "Rejected" and assignment.state == Assignment.State.REJECTED
        if item.get("WorkerId") != _worker_id(assignment) and not both_rejected:
            problem(
                f"{name} is worker {_worker_id(assignment)}'s here but worker "
                f"{item.get('WorkerId')}'s on MTurk.",
                assignment,
            )
        rewarded = assignment.pk in here.rewards
        if status == "Approved" and not rewarded:
            problem(
                f"{name} is {assignment.state} here but approved on MTurk, whose decision "
                "stands (MTurk paid its reward; the ledger has none).",
                assignment,
            )
        elif status == "Rejected" and rewarded:
            problem(
                f"{name} is {assignment.state} here with its reward in the ledger but rejected "
                "on MTurk, whose decision stands (MTurk paid nothing).",
                assignment,
            )
        elif (
            assignment.state in DECIDED
            and here.ext[assignment.pk].reported_at is not None
            and status.lower() != assignment.state
        ):
            problem(
                f"{name} is {assignment.state} here and that was sent, but it is "
                f"{status.lower()} on MTurk.",
                assignment,
            )
    for assignment in here.by_hit.get(hit.pk, []):
        ref = here.ext[assignment.pk]
        # rejected work MTurk does not list was never submitted there (confirm.py): no one
        # was paid for it on either side
        submitted_there = ref.confirmed_at is not None or ref.reported_at is not None
        rejected = assignment.state == Assignment.State.REJECTED
        if submitted_there and not rejected and assignment.pk not in listed:
            problem(
                f"assignment #{assignment.pk} ({ref.external_id}) was submitted on MTurk, "
                "but MTurk no longer lists it.",
                assignment,
            )
    return found


def _bonus_problems(
    paid: list[tuple[int, dict[str, Any]]], unchecked: set[int]
) -> list[LedgerDiscrepancy]:
    entries = {
        e.pk: e
        for e in LedgerEntry.objects.filter(
            kind=LedgerEntry.Kind.BONUS, platform=MTURK
        ).select_related("worker__mturk_worker")
    }
    sent = dict(refs.refs(platform=MTURK, kind=Kind.PAYMENT).values_list("local_id", "reported_at"))
    found: list[LedgerDiscrepancy] = []
    by_entry: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for project, payment in paid:
        pk = bonus_entry_id(payment.get("Reason", ""))
        if pk in entries:
            by_entry[pk].append(payment)
            continue
        found.append(
            LedgerDiscrepancy(
                project_id=project,
                platform=MTURK,
                problem=f"a bonus of {payment['BonusAmount']} USD to worker "
                f"{payment['WorkerId']} on assignment {payment['AssignmentId']} was paid on "
                "MTurk but is not in the ledger.",
            )
        )
    for entry in entries.values():
        if entry.project_id in unchecked:
            continue
        payments = by_entry.get(entry.pk, [])
        name = (
            f"bonus #{entry.pk} of {entry.amount_cents / 100:.2f} {entry.currency} to "
            f"{entry.worker.get_username()}"
        )
        text = ""
        if not payments:
            text = (
                f"{name} was sent to MTurk, but MTurk does not list it."
                if sent.get(entry.pk) is not None
                else f"{name} is in the ledger but not paid on MTurk yet (see its entry)."
            )
        elif len(payments) > 1:
            text = f"{name} was paid {len(payments)} times on MTurk."
        elif Decimal(payments[0]["BonusAmount"]) * 100 != entry.amount_cents:
            text = f"{name} was paid as {payments[0]['BonusAmount']} USD on MTurk."
        elif payments[0]["WorkerId"] != _worker_id_of_entry(entry):
            text = f"{name} was paid to worker {payments[0]['WorkerId']} on MTurk."
        if text:
            found.append(
                LedgerDiscrepancy(
                    project_id=entry.project_id,
                    platform=MTURK,
                    entry=entry,
                    assignment_id=entry.assignment_id,
                    problem=text,
                )
            )
    return found


def _worker_id_of_entry(entry: LedgerEntry) -> str | None:
    owner = getattr(entry.worker, "mturk_worker", None)
    return owner.worker_id if owner is not None else None


def mturk_reconcile(*, client: Any = None) -> dict[str, int]:
    """Compares the ledger and the assignments' states with MTurk's records and makes
    MTurk's discrepancies what differs now. Returns how many stand and how many projects
    MTurk did not answer for (their earlier discrepancies are kept)."""
    hits = list(mturk_hits().select_related("batch").order_by("pk"))
    ids = refs.external_ids(platform=MTURK, kind=Kind.HIT, local_ids=[h.pk for h in hits])
    found: list[LedgerDiscrepancy] = []
    paid: list[tuple[int, dict[str, Any]]] = []
    unchecked: set[int] = set()
    if hits:
        client = client or mturk_client()
        here = _Here()
    for hit in hits:
        try:
            there = _pages(client.list_assignments_for_hit, "Assignments", HITId=ids[hit.pk])
            bonuses = _pages(client.list_bonus_payments, "BonusPayments", HITId=ids[hit.pk])
        except (ClientError, BotoCoreError) as exc:
            logger.warning("MTurk did not list HIT %s: %s", ids[hit.pk], mturk_error(exc))
            unchecked.add(hit.batch.project_id)
            continue
        found.extend(_hit_problems(hit, there, here))
        paid.extend((hit.batch.project_id, b) for b in bonuses)
    found.extend(_bonus_problems(paid, unchecked))
    standing = discrepancies_record(platform=MTURK, found=found, unchecked=unchecked)
    return {"discrepancies": standing, "failed": len(unchecked)}
