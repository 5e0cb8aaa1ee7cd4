"""Batches for the annotation tests (personas come from tests/conftest.py; the helpers that
make clips, subsets and batches are in tests/annotation/factories.py)."""

from __future__ import annotations

from typing import Any

import pytest

from annotation.models import Batch
from core.models import Project
from curation.models import Split
from tests.annotation.factories import MakeBatch, make_clips, make_subset, publish


@pytest.fixture
def make_batch(project: Project) -> MakeBatch:
    """make_batch(clips=3, captions_per_clip=2, …): a published batch on fresh clips."""

    def make(*, clips: int = 3, split: str = Split.VAL, **overrides: Any) -> Batch:
        subset = make_subset(project, make_clips(clips), split)
        return publish(subset, split=split, **overrides)

    return make


@pytest.fixture
def batch(make_batch: MakeBatch) -> Batch:
    """Three clips, one per HIT, two captions each."""
    return make_batch()
