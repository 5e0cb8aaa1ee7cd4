"""Curation data for the page and API tests: the full AudioSet ontology and the balanced-list
excerpt, a recipe, a built subset with one playable clip, and a clip in no subset.

The ontology and segments are loaded once per test module (committed, removed at the end):
importing 632 classes for each of a hundred tests would cost most of the run. Each test
still runs in its own transaction, so what a test changes (flags, recipes) is rolled back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile

from core.models import Project
from curation.models import Clip, Label, Recipe, Subset, SubsetClip
from curation.recipes import RecipeSpec
from curation.services import ontology_import, recipe_save, segments_import, subset_build
from curation.services import subsets as subset_services
from tests.conftest import FIXTURES, wav_bytes

# A one-pixel PNG: these tests serve the chart, not judge it (test_recipes draws real ones).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


@pytest.fixture(scope="module")
def audioset(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    with django_db_blocker.unblock():
        ontology_import(path=FIXTURES / "audioset_ontology.json")
        segments_import(path=FIXTURES / "segments" / "balanced_head.csv", segment_list="balanced")
        yield
        Clip.labels.through.objects.all().delete()
        Clip.objects.all().delete()
        Label.objects.update(word_label=None)
        Label.children.through.objects.all().delete()
        Label.objects.all().delete()


@dataclass
class Curation:
    project: Project
    recipe: Recipe
    subset: Subset
    clip: Clip  # in the subset, ready, with audio and a video hint
    stray: Clip  # ready, with audio, in no subset of any project
    label: Label  # Speech: on 9 clips of the balanced excerpt


@pytest.fixture
def curation(
    audioset: None,
    project: Project,
    alice: Any,
    settings: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Curation:
    settings.MEDIA_ROOT = tmp_path / "media"
    monkeypatch.setattr(subset_services, "_subset_chart", lambda *_, **__: PNG)
    recipe = recipe_save(
        project=project,
        name="Balanced",
        spec=RecipeSpec(segment_lists=["balanced"], val_size=2, test_size=2),
        created_by=alice,
    )
    subset = subset_build(recipe=recipe, slug="balanced-1")
    clip = Clip.objects.get(
        pk=SubsetClip.objects.filter(subset=subset).order_by("clip_id")[0].clip_id
    )
    clip.audio.save("clip.wav", ContentFile(wav_bytes(seconds=10.0)), save=False)
    clip.video.save("clip.mp4", ContentFile(b"not really a video"), save=False)
    clip.status, clip.duration_seconds = Clip.Status.READY, 10.0
    clip.save()
    stray = Clip(source=Clip.Source.LOCAL, original_name="stray.wav", status=Clip.Status.READY)
    stray.audio.save("stray.wav", ContentFile(wav_bytes()), save=False)
    stray.save()
    return Curation(
        project=project,
        recipe=recipe,
        subset=subset,
        clip=clip,
        stray=stray,
        label=Label.objects.get(mid="/m/09x0r"),
    )
