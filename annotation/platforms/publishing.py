"""Publishing a batch on a crowd platform from its page: which platforms a batch may go
to, and the service that checks it can go there and queues the platform's publish job
(`<platform>_publish` in core.jobs, the same job its management command runs)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from annotation.models import Batch, Platform
from annotation.platforms import PLATFORMS, platform_get
from core.jobs import JOB_KINDS
from core.models import Job, Role
from core.services import job_enqueue, require_role


@dataclass(frozen=True)
class Offer:
    platform: str
    label: str
    again: bool  # the batch is there already: publishing again sends only what is missing


def publish_job_kind(platform: str) -> str:
    return f"{platform}_publish"


def platforms_offered(*, batch: Batch) -> list[Offer]:
    """The platforms the batch can be published on from its page: each with a publish job,
    while the batch is local or already on that platform (a batch goes to one only)."""
    if batch.state != Batch.State.PUBLISHED:
        return []
    return [
        Offer(name, platform_get(name).label, again=batch.platform == name)
        for name in PLATFORMS
        if publish_job_kind(name) in JOB_KINDS and batch.platform in (Platform.LOCAL, name)
    ]


def batch_platform_publish(*, batch: Batch, platform: str, by: User) -> Job:
    """Queues the job that publishes `batch` on `platform`, once the platform said it can
    go there (ValidationError with its reason otherwise, such as Prolific's minimum hourly
    rate). Researchers only."""
    require_role(batch.project, by, Role.RESEARCHER)
    kind = publish_job_kind(platform)
    if kind not in JOB_KINDS:
        raise ValidationError(f"Batches are not published on {platform!r} from Earmark.")
    there = platform_get(platform)
    there.publish_check(batch=batch)
    return job_enqueue(
        kind=kind,
        params={"batch_id": batch.pk},
        created_by=by,
        project=batch.project,
        label=f"Publish {batch.name} on {there.label}",
    )
