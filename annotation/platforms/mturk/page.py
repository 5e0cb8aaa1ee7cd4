"""The ExternalQuestion page's checks: who is asking, what MTurk confirms, how often.

MTurk shows each HIT's page (/mturk/hits/<hit id>/, views.py) in a frame with
`assignmentId`, `hitId`, `workerId` and `turkSubmitTo`; before the worker accepts,
`assignmentId` is ASSIGNMENT_ID_NOT_AVAILABLE and the page is a preview. On submit the
captions are checked and stored by annotation.services (the HIT page's rules) and the
worker's browser posts the assignment back to `turkSubmitTo`, which completes it on MTurk.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Assignment, Hit, MTurkWorker, Platform
from annotation.platforms import refs
from annotation.platforms.limits import counted
from annotation.platforms.mturk.client import (
    MTURK,
    Kind,
    MTurkUnconfirmed,
    TooManyRequests,
    assignment_by_mturk_id,
    assignment_mturk_id,
    hit_mturk_id,
    hit_type_id,
    mturk_assignments,
    mturk_client,
    mturk_error,
)
from annotation.platforms.mturk.workers import mturk_worker, mturk_worker_user, worker_id_checked
from annotation.platforms.slots import released_there
from crowd.models import Block

PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
TOKEN_SALT = "annotation.mturk"

logger = logging.getLogger(__name__)


def submit_to_checked(turk_submit_to: str) -> str:
    """`turkSubmitTo` when it is one of settings.MTURK_SUBMIT_HOSTS: the page posts the
    worker's browser there, so any other address is refused."""
    parts = urlsplit(turk_submit_to)
    origin = f"{parts.scheme}://{parts.netloc}"
    if origin not in settings.MTURK_SUBMIT_HOSTS or parts.path not in ("", "/"):
        raise ValidationError(f"turkSubmitTo {turk_submit_to!r} is not an MTurk address.")
    return origin


# Who is asking: what MTurk confirms --------------------------------------------------------
#
# The page's query string (assignmentId, hitId, workerId) comes from the visitor's browser,
# and anyone who has seen a HIT's preview knows its URL, so nothing in it is believed
# until MTurk's requester API (signed with our credentials) backs it:
#
# - GetAssignment answers only for assignments a worker has submitted (Submitted,
#   Approved, Rejected: boto3's AssignmentStatus has no other value). For one still in
#   progress, accepted and not yet submitted, which is what a page opening for work
#   holds, MTurk answers a RequestError saying the operation "can be called with a status
#   of: Reviewable,Approved,Rejected"; for an id it has no assignment under, a RequestError
#   saying so. assignment_verify tells the three apart: an assignment MTurk returns must
#   be this HIT's and this worker's; the in-progress refusal is the one error that lets
#   a page open (matched on that wording, so a change there fails closed: workers are
#   refused, nothing is created); any other RequestError refuses the request; MTurk out
#   of reach or failing (a ServiceFault, a timeout) refuses it for now (MTurkUnconfirmed).
# - An assignment in progress names no HIT and no worker there, so a new one must also
#   fit MTurk's count: GetHIT's NumberOfAssignmentsPending must exceed the local
#   assignments already open on the HIT, after freeing those MTurk, asked about each by
#   its own id, says were given up (_given_up_there). Someone holding one real assignment
#   cannot fill another HIT's slots with it, open a second local assignment for one slot,
#   or push out a worker still at work (whose local assignment MTurk still has).
# - The page is asked again on submit (the form's signed token names the local
#   assignment): MTurk must still have it in progress, or submitted by this worker on
#   this HIT.
# - An assignment in progress names no worker there, so the page cannot tell a worker
#   who opened it under someone else's workerId: the submission stays provisional (its
#   PlatformRef unconfirmed; no approval, no pay) until, once the worker's browser has
#   posted to MTurk, GetAssignment names the HIT and the worker (confirm.py). On a
#   mismatch it is rejected there with the reason, and the block lands on the WorkerId
#   MTurk named.
# - Until MTurk backs a request nothing is written: no account, membership or assignment.
#   The page's requests that may reach MTurk (opening an assignment, submitting one) are
#   counted per client address, and once MTurk confirmed them per HIT, in Django's cache
#   (page_rate_check, page_confirmed).

IN_PROGRESS = "in progress"
FINISHED = ("Submitted", "Approved", "Rejected")
IN_PROGRESS_WORDING = "can be called with a status of"


def page_rate_check(*, address: str, hit: Hit) -> None:
    """Before a request of the MTurk page asks MTurk or writes rows: counts it against
    the client address, and refuses it (TooManyRequests) past the address's limit, or
    while the HIT has had its limit of requests MTurk confirmed (page_confirmed) in this
    window (MTURK_PAGE_LIMIT_*). A request refused here counts nowhere else, and one
    MTurk then refuses (a made-up or another worker's id) counts against its address
    only: no one without a real assignment can make a HIT unopenable for its workers.
    The counts live in Django's cache, so several web processes share them only through
    a shared cache backend."""
    window = settings.MTURK_PAGE_LIMIT_WINDOW_SECONDS
    bucket = int(time.time() // window)
    over = ""
    if counted(f"mturk-page:ip:{address}:{bucket}", window) > settings.MTURK_PAGE_LIMIT_PER_ADDRESS:
        over = "address"
    elif (cache.get(_hit_key(hit, bucket)) or 0) >= settings.MTURK_PAGE_LIMIT_PER_HIT:
        over = "HIT"
    if over:
        logger.warning("MTurk page of HIT #%s: too many requests per %s", hit.pk, over)
        raise TooManyRequests(
            "Too many requests for this HIT just now; please wait a few minutes and reload."
        )


def page_confirmed(*, hit: Hit) -> None:
    """Counts a request of the page MTurk confirmed against the HIT (page_rate_check)."""
    window = settings.MTURK_PAGE_LIMIT_WINDOW_SECONDS
    counted(_hit_key(hit, int(time.time() // window)), window)


def _hit_key(hit: Hit, bucket: int) -> str:
    return f"mturk-page:hit:{hit.pk}:{bucket}"


def assignment_verify(*, client: Any, hit: Hit, assignment_id: str, worker_id: str) -> str:
    """How MTurk has `assignment_id`: IN_PROGRESS, or its AssignmentStatus (Submitted,
    Approved, Rejected) once it has been submitted there by `worker_id` on `hit`.
    ValidationError when MTurk has no such assignment or it is another HIT's or worker's;
    MTurkUnconfirmed when MTurk cannot say just now. The design is above."""
    try:
        answer = client.get_assignment(AssignmentId=assignment_id)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "RequestError" and IN_PROGRESS_WORDING in mturk_error(exc):
            return IN_PROGRESS
        if code == "RequestError":
            logger.warning(
                "MTurk page of HIT #%s: MTurk refused assignment %s of worker %s: %s",
                hit.pk,
                assignment_id,
                worker_id,
                mturk_error(exc),
            )
            raise ValidationError(
                "MTurk has no assignment of yours on this HIT under this id; accept the HIT "
                "on MTurk first."
            ) from None
        logger.warning(
            "MTurk did not say how assignment %s stands: %s", assignment_id, mturk_error(exc)
        )
        raise MTurkUnconfirmed(
            "MTurk could not confirm your assignment just now; please try again in a minute."
        ) from None
    except BotoCoreError as exc:
        logger.warning("MTurk did not say how assignment %s stands: %s", assignment_id, exc)
        raise MTurkUnconfirmed(
            "MTurk could not confirm your assignment just now; please try again in a minute."
        ) from None
    there = answer.get("Assignment", {})
    if (there.get("HITId"), there.get("WorkerId")) != (hit_mturk_id(hit), worker_id):
        logger.warning(
            "MTurk page of HIT #%s: assignment %s claimed for worker %s is worker %s's on "
            "HIT %s there",
            hit.pk,
            assignment_id,
            worker_id,
            there.get("WorkerId"),
            there.get("HITId"),
        )
        raise ValidationError("This assignment belongs to another HIT or worker.")
    status = str(there.get("AssignmentStatus", ""))
    if status not in FINISHED:
        raise MTurkUnconfirmed(f"MTurk gave assignment {assignment_id} an unknown status.")
    return status


def _open_here(hit: Hit) -> int:
    """The HIT's local MTurk assignments in progress."""
    return mturk_assignments().filter(hit=hit, state=Assignment.State.ACCEPTED).count()


def _pending_there(client: Any, hit: Hit) -> int:
    there = hit_mturk_id(hit)
    try:
        return int(client.get_hit(HITId=there)["HIT"]["NumberOfAssignmentsPending"])
    except (ClientError, BotoCoreError) as exc:
        logger.warning("MTurk did not answer for HIT %s: %s", there, mturk_error(exc))
        raise MTurkUnconfirmed(
            "MTurk could not confirm your assignment just now; please try again in a minute."
        ) from None


def _given_up_there(client: Any, hit: Hit, now: datetime) -> int:
    """Frees the slots of the HIT's local assignments in progress that MTurk says it no
    longer has (returned or abandoned there: GetAssignment answers neither with the
    assignment nor with the in-progress refusal). Each is asked about by its own id, so a
    newcomer's page, whatever it claims, frees no one still at work there. It runs only
    after MTurk has just given the newcomer's own assignment the in-progress refusal, so
    that refusal still reads as this code expects: were MTurk to reword it, nothing would
    get this far, rather than every assignment at work reading as given up. Returns how
    many were freed."""
    released = 0
    mine = mturk_assignments().filter(hit=hit, state=Assignment.State.ACCEPTED)
    ids = refs.external_ids(
        platform=MTURK, kind=Kind.ASSIGNMENT, local_ids=mine.values_list("pk", flat=True)
    )
    for assignment in mine:
        try:
            client.get_assignment(AssignmentId=ids[assignment.pk])
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "RequestError" and IN_PROGRESS_WORDING not in mturk_error(exc):
                released += released_there(assignment, now)
        except BotoCoreError:
            pass  # unknown: it keeps its slot
    return released


def _unseen_there_check(client: Any, hit: Hit, now: datetime) -> None:
    """MTurk has more assignments in progress on the HIT than are open here, so one of
    them can be the one opening; local ones MTurk no longer has are settled first."""
    pending = _pending_there(client, hit)
    if pending > _open_here(hit):
        return
    if _given_up_there(client, hit, now) and pending > _open_here(hit):
        return
    raise ValidationError(
        "MTurk shows no assignment of this HIT in progress besides those already open here. "
        "If you accepted it just now, reload the page in a minute; otherwise please return it."
    )


def mturk_assignment_start(
    *,
    hit: Hit,
    assignment_id: str,
    worker_id: str,
    now: datetime | None = None,
    client: Any = None,
) -> Assignment:
    """The local assignment for MTurk's `assignment_id` (the same one when the worker
    reloads the page), taking a slot of the HIT as hit_claim would. A new one is made
    only once MTurk confirms it (see above); nothing is written for a refused request."""
    if not (assignment_id.isalnum() and 1 <= len(assignment_id) <= 64):
        raise ValidationError(f"assignmentId {assignment_id!r} is not an MTurk assignment id.")
    worker_id_checked(worker_id)
    existing = assignment_by_mturk_id(assignment_id)
    if existing is not None:
        # MTurk confirmed it when it was made here; a reload asks nothing more of MTurk
        owner = MTurkWorker.objects.filter(user_id=existing.worker_id).first()
        if existing.hit_id != hit.pk or owner is None or owner.worker_id != worker_id:
            raise ValidationError("This assignment belongs to another HIT or worker.")
        return existing
    batch = hit.batch
    if batch.platform != Platform.MTURK or not hit_type_id(batch) or not hit_mturk_id(hit):
        raise ValidationError("This HIT is not on MTurk.")
    if not batch.is_open(now):
        raise ValidationError("This batch is closed; please return the HIT.")
    now = now or timezone.now()
    client = client or mturk_client()
    status = assignment_verify(
        client=client, hit=hit, assignment_id=assignment_id, worker_id=worker_id
    )
    if status != IN_PROGRESS:
        raise ValidationError(f"This assignment is already {status.lower()} on MTurk.")
    known = mturk_worker_user(worker_id=worker_id)
    if (
        known is not None
        and Block.objects.active().filter(worker=known, project=batch.project).exists()
    ):
        raise ValidationError(
            "You are blocked from this project's HITs; please return this one on MTurk."
        )
    _unseen_there_check(client, hit, now)
    assignment = _mturk_assignment_open(hit, worker_id, assignment_id, now)
    if assignment is None and _given_up_there(client, hit, now):
        # MTurk let this worker accept, so a slot is free there: one whose worker
        # returned it, which the periodic sync had not caught up with yet
        assignment = _mturk_assignment_open(hit, worker_id, assignment_id, now)
    if assignment is None:
        raise ValidationError("This HIT has all the captions it wants; please return it.")
    return assignment


def mturk_submit_check(*, assignment: Assignment, client: Any = None) -> None:
    """Asks MTurk again before the page stores captions: the assignment must still be in
    progress there, or submitted there by its worker on its HIT."""
    owner = MTurkWorker.objects.filter(user_id=assignment.worker_id).first()
    if owner is None:
        raise ValidationError("This assignment is not an MTurk worker's.")
    status = assignment_verify(
        client=client or mturk_client(),
        hit=assignment.hit,
        assignment_id=assignment_mturk_id(assignment),
        worker_id=owner.worker_id,
    )
    if status not in (IN_PROGRESS, "Submitted"):
        raise ValidationError(f"This assignment is already {status.lower()} on MTurk.")


class _HitFull(Exception):
    """Raised inside the transaction that makes a worker's rows, to undo them."""


def _mturk_assignment_open(
    hit: Hit, worker_id: str, assignment_id: str, now: datetime
) -> Assignment | None:
    """The worker's account (made on first need) and a new assignment on a slot of the
    HIT, in one transaction: None, with nothing written, when the HIT is full here."""
    try:
        with transaction.atomic():
            worker = mturk_worker(worker_id=worker_id, project=hit.batch.project)
            assignment = _mturk_assignment_take(hit, worker, assignment_id, now)
            if assignment is None:
                raise _HitFull
            return assignment
    except _HitFull:
        return None


def _mturk_assignment_take(
    hit: Hit, worker: User, assignment_id: str, now: datetime
) -> Assignment | None:
    """A new local assignment on a slot of the HIT; None when the HIT is full here. The
    worker's old assignment of the HIT, when they come back with a new assignmentId, was
    freed by _given_up_there (MTurk gives a worker one assignment of a HIT at a time, and
    the new one is not counted in GetHIT's pending until the old one left); one MTurk still
    has in progress keeps the new one out (assignment_one_open)."""
    try:
        with transaction.atomic():
            took = Hit.objects.filter(pk=hit.pk, taken__lt=F("max_assignments")).update(
                taken=F("taken") + 1
            )
            if not took:
                return None
            assignment = Assignment.objects.create(
                hit=hit, worker=worker, accepted_at=now, deadline=now + hit.batch.time_allotted
            )
            refs.ref_create(
                platform=MTURK, kind=Kind.ASSIGNMENT, row=assignment, external=assignment_id
            )
            return assignment
    except IntegrityError:
        raise ValidationError(
            "You already hold another HIT of ours, or did this one: submit or return the "
            "other first."
        ) from None


def page_token(*, assignment: Assignment, submit_to: str) -> str:
    """What the page's form carries instead of a session: MTurk shows the page in a
    third-party frame, where the browser sends no cookies of ours."""
    return signing.dumps({"a": assignment.pk, "s": submit_to}, salt=TOKEN_SALT)


def page_token_read(token: str, *, max_age: int) -> tuple[Assignment, str]:
    try:
        data = signing.loads(token, salt=TOKEN_SALT, max_age=max_age)
    except signing.BadSignature:
        raise ValidationError("This page has expired or was altered; reload the HIT.") from None
    assignment = Assignment.objects.select_related("hit__batch").filter(pk=data["a"]).first()
    if assignment is None or not assignment_mturk_id(assignment):
        raise ValidationError("This page's assignment no longer exists.")
    return assignment, data["s"]
