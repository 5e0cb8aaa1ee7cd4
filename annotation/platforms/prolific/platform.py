"""Prolific as an annotation.platforms.base.CrowdPlatform."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from annotation.models import Batch, Platform
from annotation.platforms.prolific.client import prolific_client
from annotation.platforms.prolific.publish import batch_prolific_publish, prolific_filters
from annotation.platforms.prolific.sync import prolific_sync
from core.progress import ProgressFn


class ProlificPlatform:
    name = Platform.PROLIFIC
    label = "Prolific"

    def publish(self, *, batch: Batch, by: User | None, progress: ProgressFn) -> dict[str, Any]:
        return batch_prolific_publish(batch=batch, by=by, progress=progress)

    def requirements(self, *, batch: Batch) -> list[dict[str, Any]]:
        return prolific_filters(batch, client=prolific_client())

    def sync(self) -> dict[str, int]:
        return prolific_sync()
