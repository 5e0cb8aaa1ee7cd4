"""MTurk mode: a published batch offered on Amazon Mechanical Turk as ExternalQuestion HITs.

Each local HIT becomes one MTurk HIT (same MaxAssignments) whose question is this site's
page /mturk/hits/<hit id>/. MTurk shows it in a frame with `assignmentId`, `hitId`,
`workerId` and `turkSubmitTo`; before the worker accepts, `assignmentId` is
ASSIGNMENT_ID_NOT_AVAILABLE and the page is a preview. On submit the captions are checked
and stored by annotation.services (the HIT page's rules) and the worker's browser posts
the assignment back to `turkSubmitTo`, which completes it on MTurk.

MTurk decides who works on which HIT, so a batch on MTurk is no longer offered by the
local engine (hit_claim). An MTurk worker becomes a local user (an MTurkWorker row holds
their WorkerId; the account is named "mturk-<WorkerId>", a prefix reserved to the site)
and an annotator of the project, so review, blocks and worker pages work unchanged. Reviews are
sent back with mturk_reviews_send (ApproveAssignment / RejectAssignment), which MTurk's
own payment follows; it is idempotent and retried until MTurk takes each decision.
Assignments returned or abandoned on MTurk give their local slot back through
mturk_returns_sync (MTurk's API says so only once no one is at work on the HIT there).

The API is reached with boto3 at settings.MTURK_ENDPOINT_URL, the requester sandbox
unless configured otherwise; credentials are boto3's usual (AWS_ACCESS_KEY_ID, …).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape, quoteattr

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from annotation.models import Assignment, Batch, Hit, MTurkWorker
from core.models import Job, Membership, Project, Role
from core.progress import ProgressFn, no_progress
from core.services import membership_add, require_role
from core.usernames import MTURK_PREFIX
from crowd.models import BatchRequirements, Block, Qualification

PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
FRAME_HEIGHT = 0  # MTurk sizes the frame to the page
QUESTION_XMLNS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
    "ExternalQuestion.xsd"
)
# MTurk's system qualifications, for a batch's minimum approval rate and approved count,
# and its workers' locale
PERCENT_APPROVED = "000000000000000000L0"
NUMBER_APPROVED = "00000000000000000040"
WORKER_LOCALE = "00000000000000000071"
QUESTION_FORM_XMLNS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/QuestionForm.xsd"
)
AUDIO_SALT = "annotation.mturk.qualification-audio"
TEST_DURATION_SECONDS = 3600
RETRY_DELAY_SECONDS = 24 * 3600  # a worker who did not pass may try again, as here
TOKEN_SALT = "annotation.mturk"
USERNAME_PREFIX = MTURK_PREFIX  # a label only: identity is MTurkWorker.worker_id

logger = logging.getLogger(__name__)


# The worker's page waits on MTurk's answers: a few seconds at most, not boto3's default
# of a minute per try and five tries, which would hold a web process that long.
CLIENT_CONFIG = Config(
    connect_timeout=5, read_timeout=15, retries={"mode": "standard", "max_attempts": 3}
)


def mturk_client() -> Any:
    import boto3

    return boto3.client(
        "mturk",
        endpoint_url=settings.MTURK_ENDPOINT_URL,
        region_name=settings.MTURK_REGION,
        config=CLIENT_CONFIG,
    )


def mturk_error(exc: Exception) -> str:
    """MTurk's own message for a failed call (botocore ClientError), or the exception."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return f"{error.get('Code', 'Error')}: {error.get('Message', '')}".strip()
    return str(exc)


# Publishing -------------------------------------------------------------------------------


def external_question(url: str) -> str:
    return (
        f'<ExternalQuestion xmlns="{QUESTION_XMLNS}">'
        f"<ExternalURL>{escape(url)}</ExternalURL>"
        f"<FrameHeight>{FRAME_HEIGHT}</FrameHeight>"
        "</ExternalQuestion>"
    )


def hit_external_url(hit: Hit) -> str:
    return settings.MTURK_EXTERNAL_URL.rstrip("/") + reverse("mturk_hit", args=[hit.pk])


# What a batch asks of its workers there ------------------------------------------------------
#
# A batch's requirements (crowd.BatchRequirements) become its HIT type's
# QualificationRequirements: the approval rate and count are MTurk's system qualifications
# PercentAssignmentsApproved and NumberHITsApproved (a worker's whole MTurk record, as
# AudioCaps asked for); the locales its Worker_Locale, `In` the batch's countries; a
# qualification test of the project a qualification type of ours, made once per test with
# the test as its Test (a QuestionForm: each clip's audio behind a signed link to this
# site, a free-text box per clip), which annotation.mturk_qualifications grades through
# MTurk's qualification requests. Workers see such a HIT (ActionsGuarded "Accept" on our
# own types) and MTurk offers them the test.


def qualification_requirements(batch: Batch, *, client: Any) -> list[dict[str, Any]]:
    """The batch's requirements as MTurk QualificationRequirements, making the MTurk
    qualification type of each required test that has none yet."""
    requirements = (
        BatchRequirements.objects.filter(batch=batch)
        .prefetch_related("qualifications", "locales")
        .first()
    )
    if requirements is None:
        return []
    wanted: list[dict[str, Any]] = []
    for type_id, value in (
        (PERCENT_APPROVED, requirements.min_approval_percent),
        (NUMBER_APPROVED, requirements.min_approved),
    ):
        if value:
            wanted.append(
                {
                    "QualificationTypeId": type_id,
                    "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [value],
                    "ActionsGuarded": "DiscoverPreviewAndAccept",
                }
            )
    locales = sorted(str(locale.country) for locale in requirements.locales.all())
    if locales:
        wanted.append(
            {
                "QualificationTypeId": WORKER_LOCALE,
                "Comparator": "In",
                "LocaleValues": [{"Country": code} for code in locales],
                "ActionsGuarded": "DiscoverPreviewAndAccept",
            }
        )
    for qualification in requirements.qualifications.order_by("pk"):
        wanted.append(
            {
                "QualificationTypeId": qualification_type(
                    qualification=qualification, client=client
                ),
                "Comparator": "Exists",
                # workers find and preview the HIT, and MTurk offers them the test
                "ActionsGuarded": "Accept",
            }
        )
    return wanted


def qualification_type(*, qualification: Qualification, client: Any) -> str:
    """The MTurk qualification type of the test, made on first need."""
    if qualification.mturk_qualification_type_id:
        return qualification.mturk_qualification_type_id
    project = qualification.project
    try:
        created = client.create_qualification_type(
            # unique among the requester's types, as MTurk wants
            Name=f"{qualification.name} ({project.name}, #{qualification.pk})"[:255],
            Description=(
                qualification.instructions
                or "Listen to a few short sound clips and describe each in one sentence; "
                "a reviewer reads your answers."
            )[:2000],
            Keywords="audio, captioning, sound, listening",
            QualificationTypeStatus="Active",
            Test=test_form(qualification),
            TestDurationInSeconds=TEST_DURATION_SECONDS,
            RetryDelayInSeconds=RETRY_DELAY_SECONDS,
        )
    except (ClientError, BotoCoreError) as exc:
        raise ValidationError(
            f"MTurk refused a qualification type for {qualification.name!r}: {mturk_error(exc)}"
        ) from None
    type_id = str(created["QualificationType"]["QualificationTypeId"])
    Qualification.objects.filter(pk=qualification.pk).update(mturk_qualification_type_id=type_id)
    qualification.mturk_qualification_type_id = type_id
    return type_id


def question_id(clip_id: int) -> str:
    """The QuestionIdentifier of a test clip's box (the answers name it back)."""
    return f"clip-{clip_id}"


def test_form(qualification: Qualification) -> str:
    """The test as an MTurk QuestionForm: the instructions, then per clip a link to its
    audio and a free-text box for the caption."""
    overview = qualification.instructions or (
        "Listen to each clip and describe what you hear in one sentence, in the present "
        f"tense, in {qualification.min_words} to {qualification.max_words} words."
    )
    questions = []
    for number, item in enumerate(qualification.items.order_by("position"), start=1):
        url = qualification_audio_url(qualification=qualification, clip_id=item.clip_id)
        content = (
            f'<p>Clip {number}: <a href={quoteattr(url)} target="_blank">listen</a>, then '
            "describe what you hear in one sentence.</p>"
        )
        questions.append(
            "<Question>"
            f"<QuestionIdentifier>{question_id(item.clip_id)}</QuestionIdentifier>"
            f"<DisplayName>Clip {number}</DisplayName>"
            "<IsRequired>true</IsRequired>"
            f"<QuestionContent><FormattedContent><![CDATA[{content}]]></FormattedContent>"
            "</QuestionContent>"
            "<AnswerSpecification><FreeTextAnswer>"
            '<Constraints><Length minLength="1" maxLength="500"/></Constraints>'
            "<NumberOfLinesSuggestion>2</NumberOfLinesSuggestion>"
            "</FreeTextAnswer></AnswerSpecification>"
            "</Question>"
        )
    return (
        f'<QuestionForm xmlns="{QUESTION_FORM_XMLNS}">'
        f"<Overview><Title>{escape(qualification.name)}</Title><Text>{escape(overview)}</Text>"
        "</Overview>" + "".join(questions) + "</QuestionForm>"
    )


def _audio_value(qualification_id: int, clip_id: int) -> str:
    return f"{qualification_id}:{clip_id}"


def qualification_audio_url(*, qualification: Qualification, clip_id: int) -> str:
    """A lasting link to a test clip's audio: MTurk shows the test long after it is made,
    to workers who have no account here, so the link carries its own signature."""
    signature = signing.Signer(salt=AUDIO_SALT).signature(_audio_value(qualification.pk, clip_id))
    path = reverse("mturk_qualification_audio", args=[qualification.pk, clip_id])
    return f"{settings.MTURK_EXTERNAL_URL.rstrip('/')}{path}?s={signature}"


def qualification_audio_signed(*, qualification_id: int, clip_id: int, signature: str) -> bool:
    expected = signing.Signer(salt=AUDIO_SALT).signature(_audio_value(qualification_id, clip_id))
    return constant_time_compare(expected, signature)


def _check_publishable(batch: Batch) -> None:
    if not settings.MTURK_EXTERNAL_URL.startswith("https://"):
        raise ValidationError(
            "Set MTURK_EXTERNAL_URL to the https:// address MTurk workers reach this site at."
        )
    if batch.state != Batch.State.PUBLISHED or not batch.is_open():
        raise ValidationError("Only a published, unexpired batch can go to MTurk.")


def batch_mturk_publish(
    *, batch: Batch, by: User | None, client: Any = None, progress: ProgressFn = no_progress
) -> dict[str, Any]:
    """Creates the batch's HIT type and one MTurk HIT per local HIT not yet there. Safe to
    run again after a failure: HITs already created keep their ids, and each creation
    carries a UniqueRequestToken, so MTurk never makes a HIT twice. `by` None is a trusted
    caller (a command)."""
    if by is not None:
        require_role(batch.project, by, Role.RESEARCHER)
    _check_publishable(batch)
    client = client or mturk_client()
    if not batch.mturk_hit_type_id:
        try:
            created = client.create_hit_type(
                AutoApprovalDelayInSeconds=int(batch.auto_approve_delay.total_seconds()),
                AssignmentDurationInSeconds=int(batch.time_allotted.total_seconds()),
                Reward=f"{batch.reward_cents / 100:.2f}",
                Title=f"Describe what you hear ({batch.clips_per_hit} short sound clip"
                + ("s)" if batch.clips_per_hit > 1 else ")"),
                Keywords="audio, captioning, sound, describe, listening",
                Description="Listen to short sound clips and write one sentence about "
                "what you hear in each.",
                QualificationRequirements=qualification_requirements(batch, client=client),
            )
        except Exception as exc:  # botocore errors: shown as MTurk words them
            raise ValidationError(f"MTurk refused the HIT type: {mturk_error(exc)}") from None
        batch.mturk_hit_type_id = created["HITTypeId"]
        batch.save(update_fields=["mturk_hit_type_id"])
    assert batch.expires_at is not None  # _check_publishable: the batch is open, so it expires
    lifetime = max(60, int((batch.expires_at - timezone.now()).total_seconds()))
    pending = list(batch.hits.filter(mturk_hit_id="").order_by("pk"))
    created_count = 0
    for number, hit in enumerate(pending, start=1):
        try:
            response = client.create_hit_with_hit_type(
                HITTypeId=batch.mturk_hit_type_id,
                MaxAssignments=hit.max_assignments,
                LifetimeInSeconds=lifetime,
                Question=external_question(hit_external_url(hit)),
                RequesterAnnotation=f"earmark hit {hit.pk}",
                UniqueRequestToken=f"earmark-{batch.pk}-{hit.pk}",
            )
        except Exception as exc:
            raise ValidationError(
                f"MTurk refused HIT #{hit.pk} after {created_count} were created "
                f"({mturk_error(exc)}); run the publication again to go on."
            ) from None
        Hit.objects.filter(pk=hit.pk).update(mturk_hit_id=response["HIT"]["HITId"])
        created_count += 1
        progress(number, len(pending), f"HIT #{hit.pk} on MTurk")
    return {"hit_type": batch.mturk_hit_type_id, "created": created_count}


def batch_mturk_publish_job(*, job: Job, progress: ProgressFn, batch_id: int) -> dict[str, Any]:
    batch = Batch.objects.select_related("project").get(pk=batch_id)
    return batch_mturk_publish(batch=batch, by=None, progress=progress)


# The worker's page ------------------------------------------------------------------------


def submit_to_checked(turk_submit_to: str) -> str:
    """`turkSubmitTo` when it is one of settings.MTURK_SUBMIT_HOSTS: the page posts the
    worker's browser there, so any other address is refused."""
    parts = urlsplit(turk_submit_to)
    origin = f"{parts.scheme}://{parts.netloc}"
    if origin not in settings.MTURK_SUBMIT_HOSTS or parts.path not in ("", "/"):
        raise ValidationError(f"turkSubmitTo {turk_submit_to!r} is not an MTurk address.")
    return origin


def _worker_id_checked(worker_id: str) -> str:
    if not (worker_id.isalnum() and 1 <= len(worker_id) <= 64):
        raise ValidationError(f"workerId {worker_id!r} is not an MTurk worker id.")
    return worker_id


def mturk_worker_user(*, worker_id: str) -> User | None:
    """The local account of the MTurk worker, if they have one: found by the worker id
    kept in MTurkWorker, never by a username."""
    found = MTurkWorker.objects.select_related("user").filter(worker_id=worker_id).first()
    return found.user if found is not None else None


def mturk_worker(*, worker_id: str, project: Project) -> User:
    """The local user standing for an MTurk worker, an annotator of the project; made on
    their first assignment, named `mturk-<WorkerId>` (a reserved prefix no sign-up form
    accepts), or `mturk-<WorkerId>-<n>` where an older account holds that name."""
    _worker_id_checked(worker_id)
    user = mturk_worker_user(worker_id=worker_id)
    if user is None:
        try:
            with transaction.atomic():
                user = User.objects.create_user(
                    username=_free_username(USERNAME_PREFIX + worker_id), password=None
                )
                MTurkWorker.objects.create(user=user, worker_id=worker_id)
        except IntegrityError:  # the same worker's other request made it meanwhile
            user = mturk_worker_user(worker_id=worker_id)
            if user is None:
                raise
    if not Membership.objects.filter(project=project, user=user).exists():
        membership_add(project=project, user=user, role=Role.ANNOTATOR)
    return user


def _free_username(wanted: str) -> str:
    users = User.objects
    name, n = wanted, 1
    while users.filter(username__iexact=name).exists():
        n += 1
        name = f"{wanted}-{n}"
    return name


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
# - Once the worker's browser has posted to MTurk, GetAssignment names the HIT and the
#   worker: mturk_reviews_send checks them before it sends a decision, and an assignment
#   submitted here under another worker's id is logged and never reviewed there.
# - Until MTurk backs a request nothing is written: no account, membership or assignment.
#   The page's requests that may reach MTurk (opening an assignment, submitting one) are
#   counted per client address and per HIT in Django's cache (page_rate_check).

IN_PROGRESS = "in progress"
FINISHED = ("Submitted", "Approved", "Rejected")
IN_PROGRESS_WORDING = "can be called with a status of"


class MTurkUnconfirmed(ValidationError):
    """MTurk could not be asked, or failed to answer: try again later."""


class TooManyRequests(ValidationError):
    """The page was asked too often from one address, or for one HIT."""


def page_rate_check(*, address: str, hit: Hit) -> None:
    """Counts a request of the MTurk page that may reach MTurk or write rows, per client
    address and per HIT, over a fixed window (MTURK_PAGE_LIMIT_*); TooManyRequests past
    either limit. The counts live in Django's cache, so several web processes share them
    only through a shared cache backend."""
    window = settings.MTURK_PAGE_LIMIT_WINDOW_SECONDS
    bucket = int(time.time() // window)
    over = [
        what
        for what, key, limit in (
            ("address", f"ip:{address}", settings.MTURK_PAGE_LIMIT_PER_ADDRESS),
            ("HIT", f"hit:{hit.pk}", settings.MTURK_PAGE_LIMIT_PER_HIT),
        )
        if _counted(f"mturk-page:{key}:{bucket}", window) > limit
    ]
    if over:
        logger.warning(
            "MTurk page of HIT #%s: too many requests per %s", hit.pk, " and ".join(over)
        )
        raise TooManyRequests(
            "Too many requests for this HIT just now; please wait a few minutes and reload."
        )


def _counted(key: str, window: int) -> int:
    cache.add(key, 0, timeout=window)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=window)
        return 1


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
    if (there.get("HITId"), there.get("WorkerId")) != (hit.mturk_hit_id, worker_id):
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
    return (
        Assignment.objects.filter(hit=hit, state=Assignment.State.ACCEPTED)
        .exclude(mturk_assignment_id="")
        .count()
    )


def _pending_there(client: Any, hit: Hit) -> int:
    try:
        return int(client.get_hit(HITId=hit.mturk_hit_id)["HIT"]["NumberOfAssignmentsPending"])
    except (ClientError, BotoCoreError) as exc:
        logger.warning("MTurk did not answer for HIT %s: %s", hit.mturk_hit_id, mturk_error(exc))
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
    mine = Assignment.objects.filter(hit=hit, state=Assignment.State.ACCEPTED).exclude(
        mturk_assignment_id=""
    )
    for assignment in mine:
        try:
            client.get_assignment(AssignmentId=assignment.mturk_assignment_id)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "RequestError" and IN_PROGRESS_WORDING not in mturk_error(exc):
                released += _released_there(assignment, now)
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
    _worker_id_checked(worker_id)
    existing = Assignment.objects.filter(mturk_assignment_id=assignment_id).first()
    if existing is not None:
        # MTurk confirmed it when it was made here; a reload asks nothing more of MTurk
        owner = MTurkWorker.objects.filter(user_id=existing.worker_id).first()
        if existing.hit_id != hit.pk or owner is None or owner.worker_id != worker_id:
            raise ValidationError("This assignment belongs to another HIT or worker.")
        return existing
    batch = hit.batch
    if not batch.mturk_hit_type_id or hit.mturk_hit_id == "":
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
        assignment_id=assignment.mturk_assignment_id,
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
            return Assignment.objects.create(
                hit=hit,
                worker=worker,
                accepted_at=now,
                deadline=now + hit.batch.time_allotted,
                mturk_assignment_id=assignment_id,
            )
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
    if assignment is None or not assignment.mturk_assignment_id:
        raise ValidationError("This page's assignment no longer exists.")
    return assignment, data["s"]


# Reviews ------------------------------------------------------------------------------------


def mturk_reviews_send(*, batch: Batch | None = None, client: Any = None) -> dict[str, int]:
    """Sends MTurk the local decisions on its assignments not sent yet: ApproveAssignment
    or RejectAssignment with the reviewer's feedback. Each is first looked up there
    (GetAssignment): a decision MTurk already holds (its own auto-approval may come first,
    after the same delay as ours) is not sent again, and one whose assignment MTurk gives
    to another worker or HIT than the page recorded is not sent at all: the page was
    opened under someone else's worker id, which only MTurk's answer after the submit can
    show (see "Who is asking" above). An assignment MTurk will not give, or a decision it
    refuses, is left for the next run. Returns how many were sent, refused and mismatched."""
    pending = Assignment.objects.filter(
        state__in=[Assignment.State.APPROVED, Assignment.State.REJECTED],
        mturk_review_sent_at__isnull=True,
    ).exclude(mturk_assignment_id="")
    if batch is not None:
        pending = pending.filter(hit__batch=batch)
    pending = pending.select_related("hit", "worker__mturk_worker").order_by("reviewed_at", "pk")
    counts = {"sent": 0, "refused": 0, "mismatched": 0}
    if not pending.exists():
        return counts
    client = client or mturk_client()
    for assignment in pending.iterator(chunk_size=200):
        there = _there(client, assignment)
        if there is None:
            counts["refused"] += 1
            continue
        if not _same_worker_and_hit(there, assignment):
            counts["mismatched"] += 1
            continue
        if there.get("AssignmentStatus") == "Submitted":
            try:
                _review_send(client, assignment)
            except (ClientError, BotoCoreError) as exc:  # kept for the next run
                logger.warning(
                    "MTurk refused the review of assignment #%s (%s): %s",
                    assignment.pk,
                    assignment.mturk_assignment_id,
                    mturk_error(exc),
                )
                counts["refused"] += 1
                continue
        elif not _decided_there(there, assignment):
            counts["refused"] += 1
            continue
        Assignment.objects.filter(pk=assignment.pk).update(mturk_review_sent_at=timezone.now())
        counts["sent"] += 1
    return counts


def _there(client: Any, assignment: Assignment) -> dict[str, Any] | None:
    """MTurk's record of a submitted assignment; None (logged) when MTurk will not give it
    (not submitted there, refused, unreachable): asked again next run."""
    try:
        answer = client.get_assignment(AssignmentId=assignment.mturk_assignment_id)
    except (ClientError, BotoCoreError) as exc:
        logger.warning(
            "MTurk did not say how assignment #%s (%s) stands: %s",
            assignment.pk,
            assignment.mturk_assignment_id,
            mturk_error(exc),
        )
        return None
    there: dict[str, Any] = answer.get("Assignment", {})
    return there


def _same_worker_and_hit(there: dict[str, Any], assignment: Assignment) -> bool:
    owner = getattr(assignment.worker, "mturk_worker", None)
    here = (assignment.hit.mturk_hit_id, owner.worker_id if owner is not None else None)
    if (there.get("HITId"), there.get("WorkerId")) == here:
        return True
    logger.error(
        "Assignment #%s (%s) was submitted here as worker %s's on HIT %s, but MTurk has it "
        "as worker %s's on HIT %s: its review is not sent. Check it on MTurk.",
        assignment.pk,
        assignment.mturk_assignment_id,
        here[1],
        here[0],
        there.get("WorkerId"),
        there.get("HITId"),
    )
    return False


def _review_send(client: Any, assignment: Assignment) -> None:
    feedback = assignment.feedback[:1024]
    if assignment.state == Assignment.State.APPROVED:
        kwargs = {"RequesterFeedback": feedback} if feedback else {}
        client.approve_assignment(AssignmentId=assignment.mturk_assignment_id, **kwargs)
    else:
        client.reject_assignment(
            AssignmentId=assignment.mturk_assignment_id,
            RequesterFeedback=feedback or "Rejected by a reviewer.",
        )


def _decided_there(there: dict[str, Any], assignment: Assignment) -> bool:
    """Whether MTurk already holds a final decision; nothing more can be sent then. A
    decision other than ours is logged: MTurk's stands."""
    decided = there.get("AssignmentStatus")
    if decided not in ("Approved", "Rejected"):
        return False
    if decided.lower() != assignment.state:
        logger.warning(
            "Assignment #%s is %s here but %s on MTurk, where it stays so.",
            assignment.pk,
            assignment.state,
            decided,
        )
    return True


# Returns ------------------------------------------------------------------------------------


def _released_there(assignment: Assignment, now: datetime) -> bool:
    """Frees the slot of a local assignment MTurk no longer has in progress: returned by
    its worker there, or abandoned (its time there ran out). False when it left the
    accepted state meanwhile (submitted through the page, expired by the sweep)."""
    from annotation.services.assignments import assignment_locked, slot_release

    with transaction.atomic():
        locked = assignment_locked(assignment)
        if locked.state != Assignment.State.ACCEPTED:
            return False
        late = locked.is_late(now)
        slot_release(locked, Assignment.State.ABANDONED if late else Assignment.State.RETURNED, now)
    return True


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
    mturk_assignment_start settles a HIT at once when a worker comes back to it with a new
    assignmentId, or when a new worker opens the page of a HIT full here, by asking MTurk
    about each local assignment in progress (_given_up_there).
    """
    now = now or timezone.now()
    accepted = Assignment.objects.filter(state=Assignment.State.ACCEPTED).exclude(
        mturk_assignment_id=""
    )
    if batch is not None:
        accepted = accepted.filter(hit__batch=batch)
    hits = Hit.objects.filter(pk__in=accepted.values("hit_id")).exclude(mturk_hit_id="")
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
    mine = list(
        Assignment.objects.filter(hit=hit, state=Assignment.State.ACCEPTED).exclude(
            mturk_assignment_id=""
        )
    )
    if not mine:
        return {"released": 0, "unsettled": 0, "failed": 0}
    client = client or mturk_client()
    try:
        pending = client.get_hit(HITId=hit.mturk_hit_id)["HIT"]["NumberOfAssignmentsPending"]
        done = _listed_there(client, hit.mturk_hit_id)
    except Exception as exc:  # botocore errors: tried again on the next run
        logger.warning("MTurk did not answer for HIT %s: %s", hit.mturk_hit_id, mturk_error(exc))
        return {"released": 0, "unsettled": 0, "failed": 1}
    gone = [a for a in mine if a.mturk_assignment_id not in done]
    if pending > 0:
        return {"released": 0, "unsettled": int(len(gone) > pending), "failed": 0}
    released = sum(_released_there(a, now) for a in gone)
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
