"""Who really submitted: an MTurk page submission is provisional until MTurk names its
worker (page.py, "Who is asking", tells why the page itself cannot know).

Once the worker's browser has posted the assignment to MTurk, GetAssignment names its
HIT and WorkerId. mturk_submissions_confirm asks for each provisional submission: the
same HIT and worker as the page recorded confirm it (annotation.services.assignment_review
approves nothing unconfirmed); another worker or HIT means the page was opened under a
claimed id. Then the assignment is rejected on MTurk with the reason (MTurk's
auto-approval would pay it otherwise), rejected here, the real WorkerId is blocked on the
project (blocks.py mirrors it with CreateWorkerBlock), and a block the claimed account got
after this work is lifted: it was the real worker's doing.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from annotation.models import Assignment, MTurkWorker, PlatformRef
from annotation.platforms import refs
from annotation.platforms.mturk.client import MTURK, Kind, mturk_client, mturk_error
from annotation.platforms.mturk.page import IN_PROGRESS_WORDING
from annotation.platforms.mturk.workers import mturk_worker
from annotation.services import assignment_review
from core.models import Project
from crowd.models import Block

FINISHED = ("Submitted", "Approved", "Rejected")
NEVER_SUBMITTED = (
    "Your captions were saved here, but the assignment was never submitted on MTurk (it was "
    "returned or its time ran out there), so MTurk cannot pay for it."
)
IMPERSONATION = (
    "This assignment was submitted on our page under another worker's id ({claimed}). "
    "Work must be done under your own worker id; it is rejected and you are blocked from "
    "this requester's HITs."
)

logger = logging.getLogger(__name__)


def mturk_submissions_confirm(*, client: Any = None) -> dict[str, int]:
    """Confirms or refutes each provisional MTurk submission against GetAssignment; one
    MTurk does not have as submitted yet (the worker's browser has not posted it) or
    cannot say now is asked again next run. Returns how many were confirmed, found
    another worker's (mismatched) and left waiting."""
    submitted = Assignment.objects.exclude(
        state__in=[Assignment.State.ACCEPTED, Assignment.State.RETURNED]
    ).filter(submitted_at__isnull=False)
    pending = list(
        refs.refs(platform=MTURK, kind=Kind.ASSIGNMENT)
        .filter(confirmed_at__isnull=True, local_id__in=submitted.values("pk"))
        .order_by("pk")
    )
    counts = {"confirmed": 0, "mismatched": 0, "waiting": 0, "gone": 0}
    if not pending:
        return counts
    client = client or mturk_client()
    for ref in pending:
        try:
            there = client.get_assignment(AssignmentId=ref.external_id).get("Assignment", {})
        except ClientError as exc:
            if _gone_there(exc):
                _never_submitted_there(ref)
                counts["gone"] += 1
            else:  # still in progress there: the worker's browser has not posted it yet
                counts["waiting"] += 1
            continue
        except BotoCoreError as exc:  # unreachable: asked again next run
            logger.info("MTurk did not say how %s stands: %s", ref.external_id, exc)
            counts["waiting"] += 1
            continue
        if there.get("AssignmentStatus") not in FINISHED:
            counts["waiting"] += 1
            continue
        assignment = Assignment.objects.select_related("hit__batch__project").get(pk=ref.local_id)
        claimed = MTurkWorker.objects.filter(user_id=assignment.worker_id).first()
        hit_there = refs.external_id(platform=MTURK, kind=Kind.HIT, row=assignment.hit_id)
        if (there.get("HITId"), there.get("WorkerId")) == (
            hit_there,
            claimed.worker_id if claimed else None,
        ):
            PlatformRef.objects.filter(pk=ref.pk).update(confirmed_at=timezone.now())
            counts["confirmed"] += 1
            continue
        if _impostor_handle(client, ref, assignment, there, claimed):
            counts["mismatched"] += 1
        else:
            counts["waiting"] += 1
    return counts


def _gone_there(exc: ClientError) -> bool:
    """MTurk has no such assignment any more: it was returned or abandoned there without
    ever being posted (GetAssignment's RequestError other than the in-progress refusal;
    see page.py for why that wording is what tells them apart)."""
    code = exc.response.get("Error", {}).get("Code", "")
    return code == "RequestError" and IN_PROGRESS_WORDING not in mturk_error(exc)


def _never_submitted_there(ref: PlatformRef) -> None:
    """Work stored here whose assignment never reached MTurk (the worker's browser did not
    post it before it was returned or timed out there): MTurk pays no one for it, so it is
    rejected here with the reason, and its slot goes back to the HIT."""
    assignment = Assignment.objects.select_related("hit__batch__project").get(pk=ref.local_id)
    now = timezone.now()
    with transaction.atomic():
        if assignment.state == Assignment.State.SUBMITTED:
            assignment_review(
                assignment=assignment,
                reviewer=None,
                approve=False,
                feedback=NEVER_SUBMITTED,
                now=now,
                by_platform=True,
            )
        PlatformRef.objects.filter(pk=ref.pk).update(confirmed_at=now, reported_at=now)


def _impostor_handle(
    client: Any,
    ref: PlatformRef,
    assignment: Assignment,
    there: dict[str, Any],
    claimed: MTurkWorker | None,
) -> bool:
    """Rejects on MTurk, then here, the assignment submitted under `claimed`'s id that
    MTurk has as another worker's; blocks that worker. False (logged) when MTurk refuses
    the rejection: tried again next run, nothing changed here."""
    claimed_id = claimed.worker_id if claimed else "?"
    real_id = str(there.get("WorkerId", ""))
    reason = IMPERSONATION.format(claimed=claimed_id)
    logger.error(
        "Assignment #%s (%s) was submitted here as worker %s's on HIT #%s, but MTurk has it as "
        "worker %s's on HIT %s: rejected there, and %s blocked.",
        assignment.pk,
        ref.external_id,
        claimed_id,
        assignment.hit_id,
        real_id,
        there.get("HITId"),
        real_id,
    )
    if there.get("AssignmentStatus") == "Submitted":
        try:
            client.reject_assignment(AssignmentId=ref.external_id, RequesterFeedback=reason)
        except (ClientError, BotoCoreError) as exc:
            logger.warning("MTurk refused to reject %s: %s", ref.external_id, mturk_error(exc))
            return False
    project = assignment.hit.batch.project
    now = timezone.now()
    with transaction.atomic():
        if assignment.state == Assignment.State.SUBMITTED:
            assignment_review(
                assignment=assignment,
                reviewer=None,
                approve=False,
                feedback=reason,
                now=now,
                by_platform=True,
            )
        PlatformRef.objects.filter(pk=ref.pk).update(confirmed_at=now, reported_at=now)
        if real_id.isalnum():
            _block_move(
                project=project,
                real_id=real_id,
                victim=assignment.worker,
                since=assignment.submitted_at or now,
                reason=reason,
            )
    return True


def _block_move(
    *, project: Project, real_id: str, victim: User, since: datetime, reason: str
) -> None:
    """The block lands on the worker MTurk named: blocked here (and mirrored there by
    blocks.py); a block the claimed account got for this work is lifted."""
    real = mturk_worker(worker_id=real_id, project=project)
    now = timezone.now()
    Block.objects.active().filter(project=project, worker=victim, created_at__gte=since).update(
        lifted_at=now, lift_reason=f"The work was MTurk worker {real_id}'s, under this id."
    )
    if not Block.objects.active().filter(project=project, worker=real).exists():
        Block.objects.create(project=project, worker=real, reason=reason)
