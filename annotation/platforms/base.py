"""What a crowd platform offers Earmark: the one interface every package in
annotation/platforms/ implements (registered by name in annotation/platforms/__init__.py).

Earmark's own life cycle (HITs, assignments, review, blocks, money) stays in the core
apps; a platform only translates it: it publishes a batch there, says whether a visitor
is the participant they claim to be (on arrival, before anything is written, and again
on submit), tells the platform the work is done, sends the review's decisions and
bonuses, frees the slots of work given up there, mirrors blocks, and maps a batch's
requirements onto what the platform can filter on. Periodic work is one call, `sync`,
which the beat runs for every platform.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.contrib.auth.models import User

from annotation.models import Batch, Platform
from core.progress import ProgressFn


class CrowdPlatform(Protocol):
    name: Platform
    label: str

    def publish(self, *, batch: Batch, by: User | None, progress: ProgressFn) -> dict[str, Any]:
        """Offers the published batch on the platform; safe to run again after a failure."""
        ...

    def requirements(self, *, batch: Batch) -> list[dict[str, Any]]:
        """The batch's requirements (crowd.BatchRequirements) in the platform's terms:
        what it filters on before a participant sees the work."""
        ...

    def sync(self) -> dict[str, int]:
        """The periodic job: confirms submissions, sends decisions and bonuses, releases
        the slots of work returned or timed out there, mirrors blocks, reconciles money."""
        ...
