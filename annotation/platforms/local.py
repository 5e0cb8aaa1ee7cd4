"""The local platform: the project's own annotators, who claim HITs on Earmark's work
page (annotation.services.hit_claim). Nothing goes anywhere, so every step is a no-op;
it is here so that every batch has a platform and callers need no special case."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from annotation.models import Batch, Platform
from core.progress import ProgressFn


class LocalPlatform:
    name = Platform.LOCAL
    label = "Earmark's own work page"

    def publish(self, *, batch: Batch, by: User | None, progress: ProgressFn) -> dict[str, Any]:
        return {}  # publishing the batch (batch_publish) is all it takes

    def requirements(self, *, batch: Batch) -> list[dict[str, Any]]:
        return []  # hits_open_to reads crowd.BatchRequirements itself

    def sync(self) -> dict[str, int]:
        return {}
