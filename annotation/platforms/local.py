"""The local platform: the project's own annotators, who claim HITs on Earmark's work
page (annotation.services.hit_claim) and are signed in, so no one needs confirming and
nothing goes anywhere. It is here so that every batch has a platform and callers need no
special case."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotation.models import Assignment, Batch, Hit, Platform
from annotation.platforms.base import Counts, sync_steps
from core.progress import ProgressFn


class LocalPlatform:
    name = Platform.LOCAL
    label = "Earmark's own work page"

    def publish(self, *, batch: Batch, by: User | None, progress: ProgressFn) -> dict[str, Any]:
        return {}  # publishing the batch (batch_publish) is all it takes

    def publish_check(self, *, batch: Batch) -> None:
        raise ValidationError(
            "A batch for Earmark's own work page is offered by publishing it (its state); "
            "there is nothing to send anywhere."
        )

    def requirements(self, *, batch: Batch) -> list[dict[str, Any]]:
        return []  # hits_open_to reads crowd.BatchRequirements itself

    def arrive(self, *, batch: Batch, hit: Hit | None, params: Mapping[str, str]) -> Assignment:
        raise ValidationError("Local batches are claimed on the work page, signed in.")

    def submit_check(self, *, assignment: Assignment) -> None:
        return None  # the signed-in worker's own assignment (annotation.services checks)

    def completion_url(self, *, assignment: Assignment, params: Mapping[str, str]) -> str:
        return reverse("work")

    def confirm(self) -> Counts:
        return {}

    def decisions_send(self) -> Counts:
        return {}

    def bonuses_send(self) -> Counts:
        return {}

    def returns_sync(self) -> Counts:
        return {}  # assignments_expire frees late ones

    def blocks_mirror(self) -> Counts:
        return {}

    def reconcile(self) -> Counts:
        return {}

    def sync(self) -> Counts:
        return sync_steps(self)
