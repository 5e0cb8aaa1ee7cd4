"""Reaching MTurk's requester API, and the MTurk ids of Earmark's rows."""

from __future__ import annotations

from typing import Any

from botocore.config import Config
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from annotation.models import Assignment, Batch, Hit, Platform, PlatformRef
from annotation.platforms import refs

MTURK = Platform.MTURK
Kind = PlatformRef.Kind

# The worker's page waits on MTurk's answers: a few seconds at most, not boto3's default
# of a minute per try and five tries, which would hold a web process that long.
CLIENT_CONFIG = Config(
    connect_timeout=5, read_timeout=15, retries={"mode": "standard", "max_attempts": 3}
)


class MTurkUnconfirmed(ValidationError):
    """MTurk could not be asked, or failed to answer: try again later."""


class TooManyRequests(ValidationError):
    """The page was asked too often from one address, or for one HIT."""


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


def hit_type_id(batch: Batch) -> str:
    """The batch's HIT type on MTurk, "" before it is published there."""
    return refs.external_id(platform=MTURK, kind=Kind.BATCH, row=batch)


def hit_mturk_id(hit: Hit) -> str:
    """The HIT's HITId on MTurk, "" before it is created there."""
    return refs.external_id(platform=MTURK, kind=Kind.HIT, row=hit)


def assignment_mturk_id(assignment: Assignment) -> str:
    """The assignment's AssignmentId on MTurk, "" for a local one."""
    return refs.external_id(platform=MTURK, kind=Kind.ASSIGNMENT, row=assignment)


def assignment_by_mturk_id(assignment_id: str) -> Assignment | None:
    pk = refs.local_id(platform=MTURK, kind=Kind.ASSIGNMENT, external=assignment_id)
    return Assignment.objects.filter(pk=pk).first() if pk is not None else None


def mturk_assignments() -> QuerySet[Assignment]:
    """Assignments made through the MTurk page."""
    return Assignment.objects.filter(pk__in=refs.on_platform(platform=MTURK, kind=Kind.ASSIGNMENT))


def mturk_hits() -> QuerySet[Hit]:
    """HITs created on MTurk."""
    return Hit.objects.filter(pk__in=refs.on_platform(platform=MTURK, kind=Kind.HIT))
