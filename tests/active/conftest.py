"""Batches with suggestions from a promoted run, for the active-learning tests (personas
come from tests/conftest.py; runs are rows, training is tested in tests/modeling)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from active.flagmodel import FlagModel
from annotation.models import Assignment, Batch
from annotation.services import hit_claim
from core.models import Project
from corpus.models import Snapshot
from curation.models import Clip, Label, SuperCategory, WordLabel
from modeling.models import Suggestion, TrainingRun
from tests.annotation.factories import make_clips, make_subset, publish
from tests.modeling.factories import make_run, ready_snapshot


def claim(worker: Any, batch: Batch | None = None) -> Assignment:
    """The assignment hit_claim hands `worker`: these tests always leave a HIT open."""
    assignment = hit_claim(worker=worker, batch=batch)
    assert assignment is not None
    return assignment


def hint(clip: Clip, word: str, name: str) -> None:
    word_label, _ = WordLabel.objects.get_or_create(
        name=word, defaults={"super_category": SuperCategory.ANIMAL}
    )
    label, _ = Label.objects.get_or_create(
        mid=f"/m/{name.lower().replace(' ', '_')}",
        defaults={"name": name, "word_label": word_label},
    )
    clip.labels.add(label)


def suggest(
    run: TrainingRun,
    clip: Clip,
    text: str,
    *,
    entropy: float = 0.5,
    beam: Sequence[tuple[str, float]] = (),
) -> Suggestion:
    """A stored suggestion; `beam` holds the other hypotheses as (text, score)."""
    hypotheses = [{"text": text, "log_prob": -1.0, "score": -0.2, "entropy": entropy}]
    hypotheses += [{"text": t, "log_prob": s * 5, "score": s, "entropy": entropy} for t, s in beam]
    return Suggestion.objects.create(
        run=run,
        clip=clip,
        text=text,
        log_prob=-1.0,
        mean_entropy=entropy,
        hypotheses=hypotheses,
        beam_size=max(1, len(hypotheses)),
    )


@pytest.fixture(scope="module")
def model(flag_model_file: Path) -> FlagModel:
    """The test flag model (tests/conftest.py builds it once a run), loaded once a module."""
    return FlagModel.load(flag_model_file)


@pytest.fixture
def snapshot(project: Project) -> Snapshot:
    return ready_snapshot(project)


@pytest.fixture
def promoted(project: Project, snapshot: Snapshot) -> TrainingRun:
    return make_run(project, snapshot, promoted_at=timezone.now())


@pytest.fixture
def clips() -> list[Clip]:
    return make_clips(4)


@pytest.fixture
def batch(project: Project, clips: list[Clip]) -> Batch:
    """Four clips, one per HIT, two captions each."""
    return publish(make_subset(project, clips))


def other_run(project: Project, snapshot: Snapshot, **fields: Any) -> TrainingRun:
    return make_run(project, snapshot, **fields)
