"""ARS and SCR in the corpus statistics: computed when their inputs exist, shown on the page,
and the reason kept when they do not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from core.models import Project
from corpus.services import statistics_compute
from tests.conftest import login
from tests.corpus import test_stats

pytestmark = pytest.mark.django_db
corpus = test_stats.corpus  # the counted corpus fixture: AudioCaps rows plus a crowd caption


@pytest.fixture
def image_table(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "coco_words.csv"
    path.write_text("word,count\nman,900\ndog,300\nroof,200\ncup,400\ngrass,500\n")
    settings.ARS_IMAGE_WORD_FREQUENCIES = str(path)
    return path


@pytest.fixture
def transcripts(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "speech.json"
    # clip A ("A dog barks twice", "A dog barks, then a man speaks") by its YouTube id
    path.write_text(json.dumps({"AAAAAAAAAAA": "a man speaks about a dog"}))
    settings.SCR_TRANSCRIPTS = str(path)
    return path


def test_ars_is_computed_against_the_image_table(corpus: Project, image_table: Path) -> None:
    data = statistics_compute(project=corpus).data

    assert data["ars"]["captions"] == 6
    assert data["ars"]["mean"] > 0
    assert data["ars"]["table"] == "coco_words.csv"
    words = [word for word, _ in data["ars"]["top_words"]]
    assert "bark" in words[:5]  # heard, never in the image captions
    assert "man" not in words[:5]


def test_scr_is_computed_for_clips_with_a_transcript(corpus: Project, transcripts: Path) -> None:
    data = statistics_compute(project=corpus).data

    # "a dog barks twice": a, dog = 2/4; "a dog barks then a man speaks": a, dog, a, man,
    # speaks = 5/7
    assert data["scr"]["mean"] == pytest.approx((2 / 4 + 5 / 7) / 2)
    assert (data["scr"]["captions"], data["scr"]["clips"]) == (2, 1)


def test_without_inputs_the_reasons_are_kept(corpus: Project, settings: Any) -> None:
    settings.ARS_IMAGE_WORD_FREQUENCIES = ""
    settings.SCR_TRANSCRIPTS = ""
    data = statistics_compute(project=corpus).data

    assert data["ars"] is None
    assert data["ars_unavailable"] == "no image-caption word-frequency table"
    assert data["scr_unavailable"] == "no speech transcripts"


def test_a_broken_input_is_named_and_the_rest_is_computed(
    corpus: Project, image_table: Path, settings: Any, tmp_path: Path
) -> None:
    image_table.write_text("word,count\ndog,plenty\n")
    broken = tmp_path / "speech.json"
    broken.write_text("[1, 2]")
    settings.SCR_TRANSCRIPTS = str(broken)
    data = statistics_compute(project=corpus).data

    assert "line 2: count 'plenty' is not a number" in data["ars_unavailable"]
    assert "speech.json: expected a JSON object" in data["scr_unavailable"]
    assert data["all"]["captions"] == 6


def test_the_statistics_page_shows_ars_and_scr(
    corpus: Project, image_table: Path, transcripts: Path, rey: Any
) -> None:
    statistics_compute(project=corpus)

    url = reverse("corpus_statistics", args=[corpus.slug])
    page = login(rey).get(url).content.decode()

    assert 'data-testid="ars"' in page
    assert "coco_words.csv" in page
    assert 'data-testid="scr"' in page
