"""Corpus fixtures: the small AudioCaps and Clotho files, a project with them imported, and
crowd captions made directly (the review workflow is tested in tests/annotation)."""

from __future__ import annotations

import io
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile
from django.core.files.base import ContentFile
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


SAMPLE_RATE = 32_000


def wav_bytes(samples: np.ndarray) -> bytes:
    """16-bit mono WAV at 32 kHz, as fetching stores clips."""
    out = io.BytesIO()
    soundfile.write(out, samples, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    return out.getvalue()


def clip_with_audio(
    *,
    seconds: float,
    seed: int,
    youtube_id: str = "",
    start: float = 0,
    name: str = "",
    project: Project | None = None,
) -> tuple[Clip, np.ndarray]:
    """A ready clip whose stored audio is `seconds` of seeded noise (returned as int16): an
    AudioSet segment, or with `name` a local file of `project`."""
    samples = np.random.default_rng(seed).integers(-8000, 8000, round(seconds * SAMPLE_RATE))
    samples = samples.astype(np.int16)
    clip = Clip.objects.create(
        source=Clip.Source.LOCAL if name else Clip.Source.YOUTUBE,
        project=project if name else None,
        youtube_id=youtube_id,
        original_name=name,
        start_seconds=Decimal(str(start)),
        end_seconds=Decimal(str(start + 10)),
        sample_rate=SAMPLE_RATE,
        duration_seconds=seconds,
    )
    clip.audio.save(f"clip{clip.pk}.wav", ContentFile(wav_bytes(samples)), save=False)
    clip.status = Clip.Status.READY
    clip.save()
    return clip, samples
