"""A Prolific participant's arrival, work and completion on this site's Prolific page.

Prolific opens the study URL with the participant's PROLIFIC_PID, the STUDY_ID and the
SESSION_ID (the submission's id there). They are the visitor's word only, so before
anything is written (an account, a membership, an assignment) the submission is looked up
with Prolific's API: it must be this study's, this participant's, and active. Unlike an
MTurk assignment in progress, an active Prolific submission names its participant, so the
work is confirmed as theirs from the start (PlatformRef.confirmed_at). The submit asks
Prolific again; the participant then goes back to Prolific with the study's completion
code, and the review's decision follows through the API (sync.py).
"""

from __future__ import annotations

import time
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation.models import Assignment, Batch, Hit, Platform, PlatformRef
from annotation.platforms import refs
from annotation.platforms.limits import counted
from annotation.platforms.prolific.client import (
    PROLIFIC,
    Kind,
    ProlificClient,
    ProlificError,
    ProlificUnconfirmed,
    prolific_client,
    study_id,
)
from core.models import Membership, Project, Role
from core.services import membership_add
from core.usernames import PROLIFIC_PREFIX
from crowd.models import Block

TOKEN_SALT = "annotation.prolific"
ACTIVE = "ACTIVE"


class TooManyRequests(ValidationError):
    """The page was asked too often from one address."""


def arrival_rate_check(*, address: str) -> None:
    """Counts a request of the page that asks Prolific (an arrival, a submit) against the
    client address: past PROLIFIC_PAGE_LIMIT_PER_ADDRESS in a window, TooManyRequests, so
    forged links cannot spend the site's API quota there."""
    window = settings.PROLIFIC_PAGE_LIMIT_WINDOW_SECONDS
    key = f"prolific-page:ip:{address}:{int(time.time() // window)}"
    if counted(key, window) > settings.PROLIFIC_PAGE_LIMIT_PER_ADDRESS:
        raise TooManyRequests("Too many requests just now; please wait a few minutes and reload.")


def _id_checked(value: str, what: str) -> str:
    if not (value.isalnum() and 1 <= len(value) <= 64):
        raise ValidationError(f"{what} {value!r} is not a Prolific id.")
    return value


def submission_verify(
    *, client: ProlificClient, batch: Batch, participant_id: str, study: str, session_id: str
) -> dict[str, object]:
    """Prolific's record of the session, which must be this batch's study's, this
    participant's, and still active; ValidationError otherwise, ProlificUnconfirmed
    when Prolific cannot say just now."""
    if not study or study != study_id(batch):
        raise ValidationError("This link belongs to another Prolific study.")
    try:
        submission = client.get(f"submissions/{session_id}/")
    except ProlificError as exc:
        if exc.status in (400, 403, 404):
            raise ValidationError(
                "Prolific has no submission of yours under this session; open the study "
                "from Prolific."
            ) from None
        raise ProlificUnconfirmed(
            "Prolific could not confirm your place just now; please try again in a minute."
        ) from None
    if (submission.get("participant_id"), submission.get("study_id")) != (participant_id, study):
        raise ValidationError("This session belongs to another participant or study.")
    status = str(submission.get("status", ""))
    if status != ACTIVE:
        raise ValidationError(f"This submission is already {status.lower()} on Prolific.")
    return dict(submission)


def participant_user(*, participant_id: str) -> User | None:
    """The local account of the Prolific participant, found by their id, never by name."""
    pk = refs.local_id(platform=PROLIFIC, kind=Kind.WORKER, external=participant_id)
    return User.objects.filter(pk=pk).first() if pk is not None else None


def participant(*, participant_id: str, project: Project) -> User:
    """The local user standing for a Prolific participant, an annotator of the project;
    made on their first place, named `prolific-<PID>` (a reserved prefix)."""
    user = participant_user(participant_id=participant_id)
    if user is None:
        name, n = PROLIFIC_PREFIX + participant_id, 1
        while User.objects.filter(username__iexact=name).exists():
            n += 1
            name = f"{PROLIFIC_PREFIX}{participant_id}-{n}"
        user = User.objects.create_user(username=name, password=None)
        refs.ref_create(platform=PROLIFIC, kind=Kind.WORKER, row=user, external=participant_id)
    if not Membership.objects.filter(project=project, user=user).exists():
        membership_add(project=project, user=user, role=Role.ANNOTATOR)
    return user


def assignment_by_session(session_id: str) -> Assignment | None:
    pk = refs.local_id(platform=PROLIFIC, kind=Kind.ASSIGNMENT, external=session_id)
    return Assignment.objects.filter(pk=pk).first() if pk is not None else None


def prolific_assignment_start(
    *,
    batch: Batch,
    participant_id: str,
    study: str,
    session_id: str,
    client: ProlificClient | None = None,
    now: datetime | None = None,
) -> Assignment:
    """The assignment of the participant's Prolific session (the same one on a reload),
    on a free slot of one of the batch's HITs; nothing is written unless Prolific confirms
    the session."""
    _id_checked(participant_id, "PROLIFIC_PID")
    _id_checked(study, "STUDY_ID")
    _id_checked(session_id, "SESSION_ID")
    existing = assignment_by_session(session_id)
    if existing is not None:
        owner = participant_user(participant_id=participant_id)
        if existing.hit.batch_id != batch.pk or owner is None or owner.pk != existing.worker_id:
            raise ValidationError("This session belongs to another participant or study.")
        return existing
    if batch.platform != Platform.PROLIFIC or not batch.is_open(now):
        raise ValidationError("This study is closed; please return your place on Prolific.")
    now = now or timezone.now()
    submission_verify(
        client=client or prolific_client(),
        batch=batch,
        participant_id=participant_id,
        study=study,
        session_id=session_id,
    )
    known = participant_user(participant_id=participant_id)
    if (
        known is not None
        and Block.objects.active().filter(worker=known, project=batch.project).exists()
    ):
        raise ValidationError(
            "You are blocked from this project's work; please return your place on Prolific."
        )
    try:
        with transaction.atomic():
            worker = participant(participant_id=participant_id, project=batch.project)
            assignment = _slot_take(batch, worker, now)
            PlatformRef.objects.create(
                platform=PROLIFIC,
                kind=Kind.ASSIGNMENT,
                local_id=assignment.pk,
                external_id=session_id,
                confirmed_at=now,  # Prolific named this participant for the session
            )
    except IntegrityError:
        raise ValidationError(
            "You already hold other work of ours; finish or return it first."
        ) from None
    return assignment


class _Full(Exception):
    pass


def _slot_take(batch: Batch, worker: User, now: datetime) -> Assignment:
    """A new assignment on the first HIT of the batch (by priority) with a free slot that
    the worker has not worked on; ValidationError when there is none."""
    done = Assignment.objects.filter(
        worker=worker,
        state__in=[
            Assignment.State.ACCEPTED,
            Assignment.State.SUBMITTED,
            Assignment.State.APPROVED,
            Assignment.State.REJECTED,
        ],
    ).values("hit_id")
    candidates = (
        Hit.objects.filter(batch=batch, taken__lt=F("max_assignments"))
        .exclude(Q(pk__in=done))
        .order_by("-priority", "id")
        .values_list("pk", flat=True)
    )
    for hit_id in candidates[:20]:
        took = Hit.objects.filter(pk=hit_id, taken__lt=F("max_assignments")).update(
            taken=F("taken") + 1
        )
        if took:
            return Assignment.objects.create(
                hit_id=hit_id, worker=worker, accepted_at=now, deadline=now + batch.time_allotted
            )
    raise ValidationError(
        "This study has all the captions it wants just now; please return your place on Prolific."
    )


def prolific_submit_check(*, assignment: Assignment, client: ProlificClient | None = None) -> None:
    """Asks Prolific again before the page stores captions: the session must still be
    active there, and the participant's."""
    session = refs.external_id(platform=PROLIFIC, kind=Kind.ASSIGNMENT, row=assignment)
    pid = refs.external_id(platform=PROLIFIC, kind=Kind.WORKER, row=assignment.worker_id)
    batch = assignment.hit.batch
    submission_verify(
        client=client or prolific_client(),
        batch=batch,
        participant_id=pid,
        study=study_id(batch),
        session_id=session,
    )


def page_token(*, assignment: Assignment) -> str:
    """What the page's form and audio links carry, naming the assignment."""
    return signing.dumps({"a": assignment.pk}, salt=TOKEN_SALT)


def page_token_read(token: str, *, max_age: int) -> Assignment:
    try:
        data = signing.loads(token, salt=TOKEN_SALT, max_age=max_age)
    except signing.BadSignature:
        raise ValidationError("This page has expired or was altered; reopen the study.") from None
    assignment = Assignment.objects.select_related("hit__batch").filter(pk=data["a"]).first()
    if (
        assignment is None
        or assignment_by_session(
            refs.external_id(platform=PROLIFIC, kind=Kind.ASSIGNMENT, row=assignment)
        )
        is None
    ):
        raise ValidationError("This page's assignment no longer exists.")
    return assignment
