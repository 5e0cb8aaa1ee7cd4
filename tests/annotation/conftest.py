"""Batches for the annotation tests (personas come from tests/conftest.py; the helpers that
make clips, subsets and batches are in tests/annotation/factories.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache

from annotation.models import Batch
from annotation.platforms.mturk import batch_mturk_publish
from annotation.platforms.prolific.publish import batch_prolific_publish
from core.models import Project
from curation.models import Split
from tests.annotation.factories import MakeBatch, make_clips, make_subset, publish
from tests.annotation.mturk_fake import FakeMTurk, fake_mturk
from tests.annotation.prolific_fake import FakeProlific, prolific_configured

SITE = "https://earmark.example.org"


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


@pytest.fixture
def mturk(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMTurk]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    cache.clear()  # the page's request counts (page_rate_check)
    with fake_mturk() as fake:
        settings.MTURK_ENDPOINT_URL = fake.url
        settings.MTURK_EXTERNAL_URL = SITE
        yield fake


@pytest.fixture
def on_mturk(make_batch: MakeBatch, mturk: FakeMTurk, alice: Any) -> Batch:
    """Two clips in one HIT wanting two captions, published on the fake MTurk."""
    batch = make_batch(clips=2, clips_per_hit=2, captions_per_clip=2)
    batch_mturk_publish(batch=batch, by=alice)
    batch.refresh_from_db()
    return batch


@pytest.fixture
def prolific(settings: Any) -> Iterator[FakeProlific]:
    cache.clear()  # the page's request counts
    with prolific_configured(settings) as fake:
        yield fake


def prolific_ready(batch: Batch, *, reward_cents: int = 100, minutes: int = 5) -> Batch:
    """The batch with a reward and an estimated time Prolific accepts (or those given)."""
    Batch.objects.filter(pk=batch.pk).update(reward_cents=reward_cents, estimated_minutes=minutes)
    batch.refresh_from_db()
    return batch


@pytest.fixture
def on_prolific(make_batch: MakeBatch, prolific: FakeProlific, alice: Any) -> Batch:
    """Two one-clip HITs wanting two captions each (four places), £1.00 for five minutes,
    published on the fake Prolific."""
    batch = prolific_ready(make_batch(clips=2, captions_per_clip=2))
    batch_prolific_publish(batch=batch, by=alice)
    batch.refresh_from_db()
    return batch
