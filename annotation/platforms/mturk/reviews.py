"""Sending MTurk the review's decisions, and freeing the local slots of assignments given
up there."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from django.utils import timezone

from annotation.models import Assignment, Batch, Hit, PlatformRef
from annotation.platforms import refs
from annotation.platforms.mturk.client import (
    MTURK,
    Kind,
    mturk_assignments,
    mturk_client,
    mturk_error,
    mturk_hits,
)
from annotation.platforms.slots import released_there

logger = logging.getLogger(__name__)


# Reviews ------------------------------------------------------------------------------------


def mturk_reviews_send(*, batch: Batch | None = None, client: Any = None) -> dict[str, int]:
    """Sends MTurk the local decisions on its assignments not sent yet: ApproveAssignment
    or RejectAssignment with the reviewer's feedback. Each is first looked up there
    (GetAssignment): a decision MTurk already holds (its own auto-approval may come first,
    after the same delay as ours) is not sent again, and one whose assignment MTurk gives
    to another worker or HIT than the page recorded is not sent at all: the page was
    opened under someone else's worker id, which only MTurk's answer after the submit can
    show (see page.py, "Who is asking"). An assignment MTurk will not give, or a decision
    it refuses, is left for the next run. Returns how many were sent, refused and
    mismatched."""
    decided = Assignment.objects.filter(
        state__in=[Assignment.State.APPROVED, Assignment.State.REJECTED]
    )
    if batch is not None:
        decided = decided.filter(hit__batch=batch)
    # a provisional submission (confirm.py) waits: its worker is not known yet
    pending = refs.refs(platform=MTURK, kind=Kind.ASSIGNMENT).filter(
        reported_at__isnull=True, confirmed_at__isnull=False, local_id__in=decided.values("pk")
    )
    counts = {"sent": 0, "refused": 0, "mismatched": 0}
    if not pending.exists():
        return counts
    client = client or mturk_client()
    by_pk = {ref.local_id: ref for ref in pending}
    assignments = (
        Assignment.objects.filter(pk__in=list(by_pk))
        .select_related("hit__batch", "worker__mturk_worker")
        .order_by("reviewed_at", "pk")
    )
    for assignment in assignments.iterator(chunk_size=200):
        ref = by_pk[assignment.pk]
        there = _there(client, assignment, ref.external_id)
        if there is None:
            counts["refused"] += 1
            continue
        if not _same_worker_and_hit(there, assignment, ref.external_id):
            counts["mismatched"] += 1
            continue
        if there.get("AssignmentStatus") == "Submitted":
            try:
                _review_send(client, assignment, ref.external_id)
            except (ClientError, BotoCoreError) as exc:  # kept for the next run
                logger.warning(
                    "MTurk refused the review of assignment #%s (%s): %s",
                    assignment.pk,
                    ref.external_id,
                    mturk_error(exc),
                )
                counts["refused"] += 1
                continue
        elif not _decided_there(there, assignment):
            counts["refused"] += 1
            continue
        PlatformRef.objects.filter(pk=ref.pk).update(reported_at=timezone.now())
        counts["sent"] += 1
    return counts


def _there(client: Any, assignment: Assignment, there_id: str) -> dict[str, Any] | None:
    """MTurk's record of a submitted assignment; None (logged) when MTurk will not give it
    (not submitted there, refused, unreachable): asked again next run."""
    try:
        answer = client.get_assignment(AssignmentId=there_id)
    except (ClientError, BotoCoreError) as exc:
        logger.warning(
            "MTurk did not say how assignment #%s (%s) stands: %s",
            assignment.pk,
            there_id,
            mturk_error(exc),
        )
        return None
    there: dict[str, Any] = answer.get("Assignment", {})
    return there


def _same_worker_and_hit(there: dict[str, Any], assignment: Assignment, there_id: str) -> bool:
    owner = getattr(assignment.worker, "mturk_worker", None)
    here = (
        refs.external_id(platform=MTURK, kind=Kind.HIT, row=assignment.hit_id),
        owner.worker_id if owner is not None else None,
    )
    if (there.get("HITId"), there.get("WorkerId")) == here:
        return True
    logger.error(
        "Assignment #%s (%s) was submitted here as worker %s's on HIT %s, but MTurk has it "
        "as worker %s's on HIT %s: its review is not sent. Check it on MTurk.",
        assignment.pk,
        there_id,
        here[1],
        here[0],
        there.get("WorkerId"),
        there.get("HITId"),
    )
    return False


def _review_send(client: Any, assignment: Assignment, there_id: str) -> None:
    feedback = assignment.feedback[:1024]
    if assignment.state == Assignment.State.APPROVED:
        kwargs = {"RequesterFeedback": feedback} if feedback else {}
        client.approve_assignment(AssignmentId=there_id, **kwargs)
    else:
        client.reject_assignment(
            AssignmentId=there_id, RequesterFeedback=feedback or "Rejected by a reviewer."
        )


def _decided_there(there: dict[str, Any], assignment: Assignment) -> bool:
    """Whether MTurk already holds a final decision; nothing more can be sent then. A
    decision other than ours is logged (and listed on the ledger page by reconcile.py):
    MTurk's stands, so MTurk paid work the ledger does not (its auto-approval came first),
    or the reverse."""
    decided = there.get("AssignmentStatus")
    if decided not in ("Approved", "Rejected"):
        return False
    if decided.lower() != assignment.state:
        # reconcile.py lists it on the ledger page, once, for as long as it stands
        logger.warning(
            "Assignment #%s is %s here but %s on MTurk, where it stays so.",
            assignment.pk,
            assignment.state,
            decided,
        )
    return True


# Returns ------------------------------------------------------------------------------------


def mturk_returns_sync(
    *, batch: Batch | None = None, client: Any = None, now: datetime | None = None
) -> dict[str, int]:
    """Frees the local slots of MTurk assignments returned or abandoned there.

    MTurk tells neither the page nor the requester API which accepted assignment a worker
    returned: ListAssignmentsForHIT lists submitted, approved and rejected ones only, and
    GetHIT counts the assignments still in progress (NumberOfAssignmentsPending). So a
    HIT is settled only when nothing is in progress there: its local accepted assignments
    that MTurk does not list were given up. A HIT with someone still working there and
    more local accepted assignments than that is left for a later run (counted as
    `unsettled`): guessing which one was returned could throw away a caption in progress.
    page.mturk_assignment_start settles a HIT at once when a worker comes back to it with a new
    assignmentId, or when a new worker opens the page of a HIT full here, by asking MTurk
    about each local assignment in progress (_given_up_there).
    """
    now = now or timezone.now()
    accepted = mturk_assignments().filter(state=Assignment.State.ACCEPTED)
    if batch is not None:
        accepted = accepted.filter(hit__batch=batch)
    hits = mturk_hits().filter(pk__in=accepted.values("hit_id"))
    counts = {"released": 0, "unsettled": 0, "failed": 0}
    if not hits.exists():
        return counts
    client = client or mturk_client()
    for hit in hits.order_by("pk"):
        for name, n in _hit_returns_sync(hit, now, client).items():
            counts[name] += n
    return counts


def _hit_returns_sync(hit: Hit, now: datetime, client: Any = None) -> dict[str, int]:
    """mturk_returns_sync for one HIT."""
    # read before asking MTurk: an assignment accepted after GetHIT is not in this list
    mine = list(mturk_assignments().filter(hit=hit, state=Assignment.State.ACCEPTED))
    if not mine:
        return {"released": 0, "unsettled": 0, "failed": 0}
    ids = refs.external_ids(platform=MTURK, kind=Kind.ASSIGNMENT, local_ids=[a.pk for a in mine])
    there_id = refs.external_id(platform=MTURK, kind=Kind.HIT, row=hit)
    client = client or mturk_client()
    try:
        pending = client.get_hit(HITId=there_id)["HIT"]["NumberOfAssignmentsPending"]
        done = _listed_there(client, there_id)
    except Exception as exc:  # botocore errors: tried again on the next run
        logger.warning("MTurk did not answer for HIT %s: %s", there_id, mturk_error(exc))
        return {"released": 0, "unsettled": 0, "failed": 1}
    gone = [a for a in mine if ids[a.pk] not in done]
    if pending > 0:
        return {"released": 0, "unsettled": int(len(gone) > pending), "failed": 0}
    released = sum(released_there(a, now) for a in gone)
    return {"released": released, "unsettled": 0, "failed": 0}


def _listed_there(client: Any, mturk_hit_id: str) -> set[str]:
    """Ids of the HIT's assignments MTurk has as submitted, approved or rejected."""
    ids: set[str] = set()
    kwargs: dict[str, Any] = {"HITId": mturk_hit_id, "MaxResults": 100}
    while True:
        page = client.list_assignments_for_hit(**kwargs)
        ids.update(a["AssignmentId"] for a in page.get("Assignments", []))
        if not page.get("NextToken") or not page.get("Assignments"):
            return ids
        kwargs["NextToken"] = page["NextToken"]
