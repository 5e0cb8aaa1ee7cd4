"""Publishing a batch on MTurk as ExternalQuestion HITs, and what the batch asks of its
workers there (MTurk's qualifications); annotation/platforms/mturk/__init__.py tells the
whole mode."""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from annotation.models import Batch, Hit, Platform
from annotation.platforms import refs
from annotation.platforms.mturk.client import MTURK, Kind, hit_type_id, mturk_client, mturk_error
from core.models import Job, Role
from core.progress import ProgressFn, no_progress
from core.services import require_role
from crowd.models import BatchRequirements, Qualification

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
# site, a free-text box per clip), which annotation.platforms.mturk.qualifications grades through
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
    known = refs.external_id(platform=MTURK, kind=Kind.QUALIFICATION, row=qualification)
    if known:
        return known
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
    refs.ref_create(platform=MTURK, kind=Kind.QUALIFICATION, row=qualification, external=type_id)
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


def publish_check(batch: Batch) -> None:
    """ValidationError saying why the batch cannot go there now (checked again by the job)."""
    if not settings.MTURK_EXTERNAL_URL.startswith("https://"):
        raise ValidationError(
            "Set MTURK_EXTERNAL_URL to the https:// address MTurk workers reach this site at."
        )
    if batch.state != Batch.State.PUBLISHED or not batch.is_open():
        raise ValidationError("Only a published, unexpired batch can go to MTurk.")
    if batch.platform not in (Platform.LOCAL, Platform.MTURK):
        raise ValidationError(
            f"Batch {batch.name!r} is on {batch.get_platform_display()}; a batch goes to one "
            "platform only."
        )


def batch_mturk_publish(
    *, batch: Batch, by: User | None, client: Any = None, progress: ProgressFn = no_progress
) -> dict[str, Any]:
    """Creates the batch's HIT type and one MTurk HIT per local HIT not yet there. Safe to
    run again after a failure: HITs already created keep their ids, and each creation
    carries a UniqueRequestToken, so MTurk never makes a HIT twice. `by` None is a trusted
    caller (a command)."""
    if by is not None:
        require_role(batch.project, by, Role.RESEARCHER)
    publish_check(batch)
    client = client or mturk_client()
    type_id = hit_type_id(batch)
    if not type_id:
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
        type_id = str(created["HITTypeId"])
        with transaction.atomic():
            refs.ref_create(platform=MTURK, kind=Kind.BATCH, row=batch, external=type_id)
            # from here on MTurk hands out the batch's HITs, not hit_claim
            batch.platform = Platform.MTURK
            batch.save(update_fields=["platform"])
    assert batch.expires_at is not None  # publish_check: the batch is open, so it expires
    lifetime = max(60, int((batch.expires_at - timezone.now()).total_seconds()))
    created_there = refs.on_platform(platform=MTURK, kind=Kind.HIT)
    pending = list(batch.hits.exclude(pk__in=created_there).order_by("pk"))
    created_count = 0
    for number, hit in enumerate(pending, start=1):
        try:
            response = client.create_hit_with_hit_type(
                HITTypeId=type_id,
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
        refs.ref_create(platform=MTURK, kind=Kind.HIT, row=hit, external=response["HIT"]["HITId"])
        created_count += 1
        progress(number, len(pending), f"HIT #{hit.pk} on MTurk")
    return {"hit_type": type_id, "created": created_count}


def batch_mturk_publish_job(*, job: Job, progress: ProgressFn, batch_id: int) -> dict[str, Any]:
    batch = Batch.objects.select_related("project").get(pk=batch_id)
    return batch_mturk_publish(batch=batch, by=None, progress=progress)
