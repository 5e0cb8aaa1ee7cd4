"""Statistics on the small AudioCaps fixture, counted by hand:

train (imported): 5 captions on 4 clips; words 4, 7, 6, 8, 5 (30 tokens, 23 distinct).
val (crowd): "A dog barks loudly" on a fifth clip: 4 words, one new ("loudly").
Labels: clip A has Dog and Bark, B Rain, C none, D Speech, Dog and Vehicle, the crowd clip Dog.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
import spacy
from django.core.management import call_command
from spacy.language import Language
from spacy.tokens import Doc

from core.models import Project
from corpus import stats
from corpus.models import CorpusImport, CorpusStatistics
from corpus.services import snapshot_build, snapshot_create, statistics_chart, statistics_compute
from corpus.services import statistics as statistics_services
from curation.models import Clip, Label
from tests.corpus.conftest import crowd_caption

# texts -> universal POS tags, for a pipeline whose tags are known in advance
TAGS = {
    "A dog barks loudly.": ["DET", "NOUN", "VERB", "ADV", "PUNCT"],
    "The dog barks.": ["DET", "NOUN", "VERB", "PUNCT"],
    "Loud barks echo": ["ADJ", "NOUN", "VERB"],
    "A run": ["DET", "NOUN"],
    "They run quickly": ["PRON", "VERB", "ADV"],
}


@Language.component("corpus_test_tags")
def _tags(doc: Doc) -> Doc:
    for token, tag in zip(doc, TAGS.get(doc.text, []), strict=False):
        token.pos_ = tag
    return doc


def tagging_pipeline() -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("corpus_test_tags")
    return nlp


@pytest.fixture
def corpus(imported: CorpusImport, project: Project, ann: Any) -> Project:
    label = {
        name: Label.objects.create(mid=mid, name=name)
        for mid, name in [
            ("/m/0bt9lr", "Dog"),
            ("/m/05tny_", "Bark"),
            ("/m/06mb1", "Rain"),
            ("/m/09x0r", "Speech"),
            ("/m/07yv9", "Vehicle"),
        ]
    }
    Clip.objects.get(youtube_id="AAAAAAAAAAA").labels.set([label["Dog"], label["Bark"]])
    Clip.objects.get(youtube_id="BBBBBBBBBBB").labels.set([label["Rain"]])
    Clip.objects.get(youtube_id="DDDDDDDDDDD").labels.set(
        [label["Speech"], label["Dog"], label["Vehicle"]]
    )
    crowd = crowd_caption(project, ann, "A dog barks loudly", split="val")
    crowd.clip.labels.set([label["Dog"]])
    return project


@pytest.fixture
def no_pos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        statistics_services, "_pos_pipeline", lambda: (None, "needs a spaCy pipeline (test)")
    )


def test_words_are_lower_cased_runs_of_letters_and_digits() -> None:
    assert stats.words("Don't stop: 3rd car isn\u2019t 1990s, Café!") == [
        "don't",
        "stop",
        "3rd",
        "car",
        "isn\u2019t",
        "1990s",
        "café",
    ]


@pytest.mark.parametrize(
    ("values", "median"),
    [([4], 4.0), ([1, 2, 3], 2.0), ([4, 4, 5, 9], 4.5), ([2, 2, 2, 3], 2.0), ([], 0.0)],
)
def test_the_median_comes_from_the_length_histogram(values: list[int], median: float) -> None:
    assert stats._median(Counter(values)) == median


def test_it_counts_table_1_per_split(corpus: Project, no_pos: None) -> None:
    data = statistics_compute(project=corpus).data

    assert data["splits"]["train"] == {
        "clips": 4,
        "captions": 5,
        "captions_per_clip": 1.25,
        "words_per_caption_mean": 6.0,
        "words_per_caption_median": 6.0,
        "clips_with_labels": 3,
        "labels_per_clip_mean": 2.0,
        "labels_per_clip_median": 2.0,
        "tokens": 30,
        "vocabulary": 23,
    }
    assert data["splits"]["val"]["words_per_caption_mean"] == 4.0
    assert data["splits"]["val"]["labels_per_clip_mean"] == 1.0


def test_it_counts_the_whole_corpus(corpus: Project, no_pos: None) -> None:
    every = statistics_compute(project=corpus).data["all"]

    assert (every["clips"], every["captions"], every["tokens"], every["vocabulary"]) == (
        5,
        6,
        34,
        24,
    )
    assert every["words_per_caption_mean"] == round(34 / 6, 4)
    assert every["words_per_caption_median"] == 5.5
    assert (every["labels_per_clip_mean"], every["labels_per_clip_median"]) == (1.75, 1.5)


def test_it_keeps_the_length_histogram_and_label_distribution(
    corpus: Project, no_pos: None
) -> None:
    data = statistics_compute(project=corpus).data

    assert data["length_histogram"] == {"4": 2, "5": 1, "6": 1, "7": 1, "8": 1}
    assert [(row["name"], row["clips"]) for row in data["labels"]] == [
        ("Dog", 3),
        ("Bark", 1),
        ("Rain", 1),
        ("Vehicle", 1),
        ("Speech", 1),
    ]


def test_it_says_when_parts_of_speech_need_a_pipeline(corpus: Project, no_pos: None) -> None:
    data = statistics_compute(project=corpus).data

    assert data["pos"] is None
    assert data["pos_unavailable"] == "needs a spaCy pipeline (test)"


def test_table_5_counts_each_word_under_its_most_frequent_tag() -> None:
    counts = stats.pos_counts(list(TAGS), tagging_pipeline())

    # barks: verb twice, noun once; run: noun once, verb once (tie: noun first)
    assert counts == {
        "vocabulary": 10,
        "nouns": 2,
        "verbs": 2,
        "adjectives": 1,
        "adverbs": 2,
        "other": 3,
    }


def test_it_tags_the_corpus_texts_with_the_pipeline(
    corpus: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    nlp = tagging_pipeline()

    def pipe(texts: Iterable[str], batch_size: int = 0) -> Iterator[Doc]:
        texts = list(texts)
        seen.extend(texts)
        return Language.pipe(nlp, texts)

    monkeypatch.setattr(nlp, "pipe", pipe)
    monkeypatch.setattr(statistics_services, "_pos_pipeline", lambda: (nlp, ""))

    data = statistics_compute(project=corpus).data

    assert len(seen) == 6
    assert "A dog barks loudly" in seen
    assert data["pos"]["pipeline"] == "en_pipeline-0.0.0"
    assert data["pos"]["vocabulary"] == 24


def test_snapshot_statistics_read_the_exported_texts(
    corpus: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = snapshot_build(
        snapshot=snapshot_create(project=corpus, fmt="audiocaps", text="raw", splits=["train"])
    )
    seen: list[str] = []
    nlp = tagging_pipeline()

    def pipe(texts: Iterable[str], batch_size: int = 0) -> Iterator[Doc]:
        seen.extend(texts)
        return Language.pipe(nlp, seen)

    monkeypatch.setattr(nlp, "pipe", pipe)
    monkeypatch.setattr(statistics_services, "_pos_pipeline", lambda: (nlp, ""))

    record = statistics_compute(project=corpus, snapshot=snapshot)

    assert seen[3] == 'An engine idles and a horn says "beep"'
    assert len(seen) == 5
    assert record.data["all"]["captions"] == 5  # from the build: train only
    assert record.data["pos"]["vocabulary"] == 23
    assert snapshot.statistics.first() == record


def test_charts_are_drawn_once_when_first_asked_for(corpus: Project, no_pos: None) -> None:
    record = statistics_compute(project=corpus)

    chart = statistics_chart(record=record, kind="lengths")
    name = chart.name

    assert chart.read()[:8] == b"\x89PNG\r\n\x1a\n"
    assert statistics_chart(record=record, kind="lengths").name == name
    assert statistics_chart(record=record, kind="labels").read()[:4] == b"\x89PNG"
    assert CorpusStatistics.objects.get().length_chart.name == name


def test_the_command_prints_the_table(corpus: Project, no_pos: None) -> None:
    out = io.StringIO()

    call_command("corpus_statistics", "--project", "sounds", stdout=out)

    text = out.getvalue()
    assert "train: 4 clips, 5 captions, 6.00 words/caption (median 6)" in text
    assert "POS: needs a spaCy pipeline (test)" in text


def test_the_pipeline_comes_from_post_processing() -> None:
    nlp, reason = statistics_services._pos_pipeline()

    assert nlp is not None
    assert reason == ""
    assert [t.pos_ for t in nlp("A dog barks loudly.")][:4] == ["DET", "NOUN", "VERB", "ADV"]


def test_a_missing_pipeline_is_named_in_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from postprocessing import nlp

    def missing(name: str | None = None) -> Any:
        raise nlp.PosPipelineUnavailable("spaCy pipeline 'en_core_web_sm' is not installed")

    monkeypatch.setattr(nlp, "pos_pipeline", missing)

    assert statistics_services._pos_pipeline() == (
        None,
        "needs a spaCy pipeline: spaCy pipeline 'en_core_web_sm' is not installed",
    )
