"""Clips, subsets, batches and the work on them, for the annotation tests and the other apps'
tests that need a published batch (personas come from tests/conftest.py; the fixtures
make_batch and batch are in tests/annotation/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import count
from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.models import Assignment, Batch, ClipAudioServed
from annotation.services import batch_publish
from core.models import Project
from curation.models import Clip, Split, Subset, SubsetClip

_youtube_ids = count()

CAPTION = "a dog barks while cars pass by"


def make_clips(n: int) -> list[Clip]:
    return Clip.objects.bulk_create(
        Clip(
            source=Clip.Source.YOUTUBE,
            youtube_id=f"yt{next(_youtube_ids):09d}",  # 11 characters, like YouTube's
            start_seconds=Decimal(30),
            end_seconds=Decimal(40),
            status=Clip.Status.READY,
            audio="clips/audio/fetched.wav",
        )
        for _ in range(n)
    )


def make_subset(project: Project, clips: list[Clip], split: str = Split.VAL) -> Subset:
    slug = f"subset-{Subset.objects.count() + 1}"
    subset = Subset.objects.create(project=project, name=slug.title(), slug=slug)
    SubsetClip.objects.bulk_create(SubsetClip(subset=subset, clip=c, split=split) for c in clips)
    return subset


def publish(subset: Subset, **overrides: Any) -> Batch:
    kwargs: dict[str, Any] = {
        "subset": subset,
        "split": Split.VAL,
        "name": "Validation captions",
        "captions_per_clip": 2,
        "clips_per_hit": 1,
        "reward_cents": 10,
        "time_allotted": timedelta(minutes=30),
        "lifetime": timedelta(days=7),
        "created_by": subset.project.created_by,
        **overrides,
    }
    return batch_publish(**kwargs)


def captions_for(assignment: Assignment, text: str = CAPTION) -> dict[int, str]:
    clip_ids = assignment.hit.hit_clips.values_list("clip_id", flat=True)
    return {clip_id: text for clip_id in clip_ids}


def listened(assignment: Assignment, *, now: datetime | None = None) -> Assignment:
    """Records that every clip of the HIT was served to the assignment an hour before `now`,
    as the HIT page's player, the API or the MTurk page record it: long enough to have been
    heard to the end, which a submit requires. Returns the assignment."""
    served_at = (now or timezone.now()) - timedelta(hours=1)
    ClipAudioServed.objects.bulk_create(
        [
            ClipAudioServed(
                assignment=assignment,
                clip_id=clip_id,
                served_at=served_at,
                earliest_heard_at=served_at,
                whole_at=served_at,
            )
            for clip_id in assignment.hit.hit_clips.values_list("clip_id", flat=True)
        ],
        ignore_conflicts=True,
    )
    return assignment


def served_writes(queries: list[dict[str, Any]]) -> list[str]:
    """The statements among `queries` (a CaptureQueriesContext's) that write a clip's
    served record: every one naming its table but a SELECT. An audio GET whose bytes the
    record already holds has none (annotation.services.clip_audio_served_unless_held)."""
    table = ClipAudioServed._meta.db_table
    return [
        q["sql"]
        for q in queries
        if table in q["sql"] and not q["sql"].lstrip().upper().startswith("SELECT")
    ]


def audio_get_served_writes(client: Client, url: str, byte_range: str | None = None) -> list[str]:
    """GETs a clip's audio at `url` (the whole file, or `byte_range` as a Range header,
    answered 206) and returns the statements that wrote its served record."""
    headers = {"Range": byte_range} if byte_range else {}
    with CaptureQueriesContext(connection) as seen:
        response = client.get(url, headers=headers)
    assert response.status_code == (206 if byte_range else 200), response
    return served_writes(seen.captured_queries)


MakeBatch = Callable[..., Batch]
