"""What a crowd platform offers Earmark: the one interface every package in
annotation/platforms/ implements (registered by name in annotation/platforms/__init__.py).

Earmark's own life cycle (HITs, assignments, review, blocks, money) stays in the core
apps; a platform only translates it: it publishes a batch there, says whether a visitor
is the participant they claim to be (on arrival, before anything is written, and again
on submit), tells the platform the work is done, sends the review's decisions and
bonuses, frees the slots of work given up there, mirrors blocks, reconciles the money and
maps a batch's requirements onto what the platform can filter on. The periodic steps run
together in `sync`, confirmation first (decisions go out only for work confirmed as its
worker's) and the reconciliation last (it compares what was meant to be sent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from django.contrib.auth.models import User

from annotation.models import Assignment, Batch, Hit, Platform
from core.progress import ProgressFn

Counts = dict[str, int]


class CrowdPlatform(Protocol):
    name: Platform
    label: str

    def publish(self, *, batch: Batch, by: User | None, progress: ProgressFn) -> dict[str, Any]:
        """Offers the published batch on the platform; safe to run again after a failure.
        Run by the core.jobs kind `<name>_publish` (publishing.py queues it)."""
        ...

    def publish_check(self, *, batch: Batch) -> None:
        """ValidationError saying why the batch cannot go there now (asked before the
        publish job is queued, so a researcher reads the reason at once)."""
        ...

    def requirements(self, *, batch: Batch) -> list[dict[str, Any]]:
        """The batch's requirements (crowd.BatchRequirements) in the platform's terms."""
        ...

    def arrive(self, *, batch: Batch, hit: Hit | None, params: Mapping[str, str]) -> Assignment:
        """The assignment of the participant the page's query string names, once the
        platform confirmed them; nothing is written otherwise (ValidationError)."""
        ...

    def submit_check(self, *, assignment: Assignment) -> None:
        """Asks the platform again before the page stores the work."""
        ...

    def completion_url(self, *, assignment: Assignment, params: Mapping[str, str]) -> str:
        """Where the participant's browser goes once the work is stored, to finish there."""
        ...

    def confirm(self) -> Counts:
        """Confirms submitted work as its worker's (what approval waits for)."""
        ...

    def decisions_send(self) -> Counts:
        """Sends the review's approvals and rejections not sent yet."""
        ...

    def bonuses_send(self) -> Counts:
        """Pays there the ledger's bonuses for its participants' work not paid yet."""
        ...

    def returns_sync(self) -> Counts:
        """Frees the local slots of work returned or timed out there."""
        ...

    def blocks_mirror(self) -> Counts:
        """Mirrors local blocks (and their lifting) there, where its API allows."""
        ...

    def reconcile(self) -> Counts:
        """Compares the ledger with the platform's records (crowd.LedgerDiscrepancy)."""
        ...

    def sync(self) -> Counts:
        """The periodic job: every step above, in that order."""
        ...


def sync_steps(platform: CrowdPlatform) -> Counts:
    """Runs a platform's periodic steps in order, each count prefixed by its step."""
    counts: Counts = {}
    for step in (
        "confirm",
        "blocks_mirror",
        "decisions_send",
        "bonuses_send",
        "returns_sync",
        "reconcile",
    ):
        counts.update({f"{step}_{k}": v for k, v in getattr(platform, step)().items()})
    return counts
