"""Corpus fixtures: the small AudioCaps and Clotho files, a project with them imported, and
crowd captions made directly (the review workflow is tested in tests/annotation)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from annotation.models import Assignment, Batch, Caption, Hit, HitClip
from core.models import Project
from corpus.models import CorpusImport
from corpus.services import captions_import
from curation.models import Clip, Split, Subset, SubsetClip
from tests.conftest import FIXTURES

AUDIOCAPS = FIXTURES / "corpus" / "audiocaps_small.csv"
CLOTHO = FIXTURES / "corpus" / "clotho_small.csv"


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def imported(project: Project, alice: Any) -> CorpusImport:
    """The small AudioCaps file imported into "sounds" as its train split."""
    return captions_import(
        project=project, path=AUDIOCAPS, fmt="audiocaps", split="train", imported_by=alice
    )


def crowd_caption(
    project: Project,
    worker: Any,
    text: str,
    *,
    split: str = Split.VAL,
    state: str = Assignment.State.APPROVED,
    clip: Clip | None = None,
) -> Caption:
    """A caption written in a HIT of a batch of the project, its assignment in `state`."""
    now = timezone.now()
    if clip is None:
        clip = Clip.objects.create(
            source=Clip.Source.YOUTUBE,
            youtube_id=f"crowd{Clip.objects.count():06d}",
            start_seconds=Decimal(10),
            end_seconds=Decimal(20),
        )
    subset, _ = Subset.objects.get_or_create(
        project=project, slug="crowd", defaults={"name": "Crowd"}
    )
    SubsetClip.objects.get_or_create(subset=subset, clip=clip, defaults={"split": split})
    batch = Batch.objects.create(
        project=project,
        subset=subset,
        split=split,
        name="batch",
        captions_per_clip=1,
        clips_per_hit=1,
        reward_cents=10,
        time_allotted=timedelta(minutes=30),
        lifetime=timedelta(days=7),
    )
    hit = Hit.objects.create(batch=batch, max_assignments=1)
    HitClip.objects.create(hit=hit, clip=clip, position=0)
    reviewed = state in (Assignment.State.SUBMITTED, Assignment.State.APPROVED)
    assignment = Assignment.objects.create(
        hit=hit,
        worker=worker,
        state=state,
        accepted_at=now - timedelta(minutes=5),
        deadline=now + timedelta(minutes=25),
        submitted_at=now if reviewed or state == Assignment.State.REJECTED else None,
    )
    return Caption.objects.create(assignment=assignment, clip=clip, text=text)
