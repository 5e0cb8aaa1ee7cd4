"""A batch as one Prolific study: places = its HITs times their overlap, the study URL this
site's Prolific page with Prolific's PROLIFIC_PID, STUDY_ID and SESSION_ID, completion by
redirect with the study's completion code, the batch's requirements as Prolific filters.

Prolific pays by the hour: the batch's reward per HIT (in PROLIFIC_CURRENCY) over its
estimated minutes must reach PROLIFIC_MIN_HOURLY_CENTS, or publishing is refused.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Sum
from django.urls import reverse
from django_countries import countries

from annotation.models import Batch, Platform
from annotation.platforms import refs
from annotation.platforms.prolific.blocks import blocklist_filter
from annotation.platforms.prolific.client import (
    PROLIFIC,
    Kind,
    ProlificClient,
    ProlificError,
    prolific_client,
    study_id,
)
from core.models import Job, Role
from core.progress import ProgressFn, no_progress
from core.services import require_role
from crowd.models import BatchRequirements

CODE_SALT = "annotation.prolific.completion-code"
COUNTRY_FILTER = "current-country-of-residence"
# where Prolific's label of a country is not django-countries' name of it
COUNTRY_LABELS = {
    "US": "United States",
    "GB": "United Kingdom",
    "RU": "Russia",
    "KR": "South Korea",
}
# Prolific puts the participant's ids in the study URL where these stand
URL_PARAMETERS = (
    "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
)


def completion_code(batch: Batch) -> str:
    """The study's completion code: derived from the batch and the site's secret, so it is
    never stored and a participant cannot guess another study's."""
    signature = signing.Signer(salt=CODE_SALT).signature(str(batch.pk))
    return "".join(ch for ch in signature.upper() if ch.isalnum())[:12]


def study_url(batch: Batch) -> str:
    path = reverse("prolific_arrive", args=[batch.pk])
    return f"{settings.PROLIFIC_EXTERNAL_URL.rstrip('/')}{path}?{URL_PARAMETERS}"


def places(batch: Batch) -> int:
    """How many participants the study takes: every HIT's slots (HITs times overlap)."""
    return int(batch.hits.aggregate(n=Sum("max_assignments"))["n"] or 0)


def hourly_rate_check(batch: Batch) -> None:
    """ValidationError unless the reward per HIT over the batch's estimated minutes reaches
    Prolific's minimum hourly rate, saying what to change."""
    currency, floor = settings.PROLIFIC_CURRENCY, settings.PROLIFIC_MIN_HOURLY_CENTS
    minutes = batch.estimated_minutes
    if not minutes:
        raise ValidationError(
            f"Batch {batch.name!r} has no estimated time per HIT; Prolific pays by the hour, "
            "so set how many minutes one HIT takes first."
        )
    hourly = batch.reward_cents * 60 / minutes
    if hourly < floor:
        needed = -(-floor * minutes // 60)  # rounded up to the next cent
        raise ValidationError(
            f"Batch {batch.name!r} pays {batch.reward_cents / 100:.2f} {currency} for an "
            f"estimated {minutes} minutes, {hourly / 100:.2f} {currency} an hour: below "
            f"Prolific's minimum of {floor / 100:.2f} {currency} an hour. Raise the reward "
            f"to at least {needed / 100:.2f} {currency} per HIT, or correct the estimate."
        )


def prolific_filters(batch: Batch, *, client: ProlificClient) -> list[dict[str, Any]]:
    """The batch's requirements as Prolific filters: the approval rate and count (a
    participant's whole Prolific record) and the countries of residence. Qualification
    tests have no Prolific counterpart, so a batch requiring one is refused."""
    requirements = (
        BatchRequirements.objects.filter(batch=batch)
        .prefetch_related("qualifications", "locales")
        .first()
    )
    if requirements is None:
        return []
    if requirements.qualifications.exists():
        names = ", ".join(q.name for q in requirements.qualifications.order_by("name"))
        raise ValidationError(
            f"Batch {batch.name!r} requires qualification tests ({names}), which Prolific "
            "cannot ask for; remove them from its requirements to publish it there."
        )
    wanted: list[dict[str, Any]] = []
    if requirements.min_approval_percent:
        wanted.append(
            {
                "filter_id": "approval_rate",
                "selected_range": {"lower": requirements.min_approval_percent, "upper": 100},
            }
        )
    if requirements.min_approved:
        wanted.append(
            {
                "filter_id": "approval_numbers",
                "selected_range": {"lower": requirements.min_approved},
            }
        )
    codes = sorted(str(locale.country) for locale in requirements.locales.all())
    if codes:
        wanted.append({"filter_id": COUNTRY_FILTER, "selected_values": _country_ids(codes, client)})
    return wanted


def _country_ids(codes: list[str], client: ProlificClient) -> list[str]:
    """Prolific's choice ids for the countries, matched by name in its filter's choices."""
    try:
        listed = client.get("filters/")["results"]
    except (ProlificError, KeyError) as exc:
        raise ValidationError(f"Prolific did not list its filters: {exc}") from None
    choices: dict[str, str] = next(
        (f["choices"] for f in listed if f.get("filter_id") == COUNTRY_FILTER), {}
    )
    by_name = {str(label).casefold(): str(choice) for choice, label in choices.items()}
    found: list[str] = []
    missing: list[str] = []
    for code in codes:
        label = COUNTRY_LABELS.get(code, str(countries.name(code)))
        choice = by_name.get(label.casefold())
        if choice is None:
            missing.append(code)
        else:
            found.append(choice)
    if missing:
        raise ValidationError(
            f"Prolific's {COUNTRY_FILTER} filter has no {', '.join(missing)}; remove "
            "them from the batch's countries to publish it there."
        )
    return found


def publish_check(batch: Batch) -> None:
    """ValidationError saying why the batch cannot go there now (checked again by the job)."""
    if not settings.PROLIFIC_EXTERNAL_URL.startswith("https://"):
        raise ValidationError(
            "Set PROLIFIC_EXTERNAL_URL to the https:// address participants reach this site at."
        )
    if batch.state != Batch.State.PUBLISHED or not batch.is_open():
        raise ValidationError("Only a published, unexpired batch can go to Prolific.")
    if batch.platform not in (Platform.LOCAL, Platform.PROLIFIC):
        raise ValidationError(
            f"Batch {batch.name!r} is on {batch.get_platform_display()}; a batch goes to one "
            "platform only."
        )
    hourly_rate_check(batch)


def batch_prolific_publish(
    *,
    batch: Batch,
    by: User | None,
    client: ProlificClient | None = None,
    progress: ProgressFn = no_progress,
) -> dict[str, Any]:
    """Creates the batch's draft study on Prolific, then publishes it. Safe to run again: a
    study already made is not made twice, and one already published is left alone. `by`
    None is a trusted caller (a command)."""
    if by is not None:
        require_role(batch.project, by, Role.RESEARCHER)
    publish_check(batch)
    client = client or prolific_client()
    study = study_id(batch)
    if not study:
        body = {
            "name": f"Describe what you hear ({batch.clips_per_hit} short sound clip"
            + ("s)" if batch.clips_per_hit > 1 else ")"),
            "internal_name": f"earmark batch {batch.pk}: {batch.name}"[:255],
            "description": "Listen to short sound clips and write one sentence about what "
            "you hear in each.",
            "external_study_url": study_url(batch),
            "prolific_id_option": "url_parameters",
            "completion_codes": [
                {
                    "code": completion_code(batch),
                    "code_type": "COMPLETED",
                    "actions": [{"action": "MANUALLY_REVIEW"}],
                }
            ],
            "total_available_places": places(batch),
            "estimated_completion_time": batch.estimated_minutes,
            "maximum_allowed_time": max(1, int(batch.time_allotted.total_seconds() // 60)),
            "reward": batch.reward_cents,
            "currency": settings.PROLIFIC_CURRENCY,
            "device_compatibility": ["desktop"],
            "filters": [
                *prolific_filters(batch, client=client),
                blocklist_filter(project=batch.project, client=client),
            ],
        }
        try:
            created = client.post("studies/", body)
        except ProlificError as exc:
            raise ValidationError(f"Prolific refused the study: {exc}") from None
        study = str(created["id"])
        with transaction.atomic():
            refs.ref_create(platform=PROLIFIC, kind=Kind.BATCH, row=batch, external=study)
            # from here on Prolific sends the batch's workers, not hit_claim
            batch.platform = Platform.PROLIFIC
            batch.save(update_fields=["platform"])
    progress(1, 2, f"study {study} drafted on Prolific")
    try:
        status = client.get(f"studies/{study}/").get("status")
        if status == "UNPUBLISHED":
            status = client.post(f"studies/{study}/transition/", {"action": "PUBLISH"}).get(
                "status"
            )
    except ProlificError as exc:
        raise ValidationError(
            f"Prolific did not publish study {study} ({exc}); run the publication again."
        ) from None
    progress(2, 2, f"study {study} is {status} on Prolific")
    return {"study": study, "status": status, "places": places(batch)}


def batch_prolific_publish_job(*, job: Job, progress: ProgressFn, batch_id: int) -> dict[str, Any]:
    batch = Batch.objects.select_related("project").get(pk=batch_id)
    return batch_prolific_publish(batch=batch, by=None, progress=progress)
