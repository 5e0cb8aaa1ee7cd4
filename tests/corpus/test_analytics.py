"""ARS and SCR (Shen et al. 2023) as pure functions: word relevance, sentence sums, inputs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from corpus import analytics
from postprocessing.nlp import pos_pipeline


@pytest.fixture(scope="module")
def nlp():
    return pos_pipeline()


def test_a_word_scores_the_log_ratio_of_its_smoothed_frequencies():
    audio = {"bark": 3.0, "dog": 1.0}
    image = {"dog": 5.0, "grass": 2.0}
    # union vocabulary: bark, dog, grass (3 words); totals 4 + 3 and 7 + 3
    scores = analytics.word_relevance(audio, image)
    assert scores["bark"] == pytest.approx(math.log((4 / 7) / (1 / 10)))
    assert scores["dog"] == 0.0  # log((2/7) / (6/10)) < 0, clipped to 0


def test_a_caption_scores_the_sum_over_its_content_words():
    relevance = {"bark": 1.5, "dog": 0.0, "loudly": 0.25}
    assert analytics.caption_relevance(["dog", "bark", "loudly"], relevance) == 1.75
    assert analytics.caption_relevance(["unseen"], relevance) == 0.0


def test_content_words_are_lemmas_without_stop_words_or_punctuation(nlp):
    lemmas = analytics.content_lemmas(["The dogs are barking loudly, then it rains."], nlp)
    assert lemmas == [["dog", "bark", "loudly", "rain"]]


def test_the_corpus_ars_is_the_mean_over_captions(nlp):
    captions = analytics.content_lemmas(["A dog barks", "A dog on the grass"], nlp)
    image = analytics.lemmatise_table({"dogs": 10.0, "grass": 10.0, "the": 50.0}, nlp)
    assert image == {"dog": 10.0, "grass": 10.0}  # lemmatised, stop words dropped
    result = analytics.audio_relevance(captions, image)
    relevance = analytics.word_relevance({"dog": 2, "bark": 1, "grass": 1}, image)
    expected = (relevance["dog"] + relevance["bark"] + relevance["dog"] + relevance["grass"]) / 2
    assert result["mean"] == pytest.approx(expected)
    assert result["captions"] == 2
    assert result["top_words"][0][0] == "bark"


def test_a_word_frequency_table_reads_csv_or_tabs_with_a_header(tmp_path: Path):
    csv_file = tmp_path / "coco.csv"
    csv_file.write_text("word,count\nDog,10\ngrass,4\ndog,2\n")
    tsv_file = tmp_path / "coco.tsv"
    tsv_file.write_text("dog\t12\ngrass\t4\n")
    assert analytics.read_word_frequencies(csv_file) == {"dog": 12.0, "grass": 4.0}
    assert analytics.read_word_frequencies(tsv_file) == {"dog": 12.0, "grass": 4.0}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("dog,10\ncat,many\n", r"line 2: count 'many' is not a number"),
        ("dog\n", r"line 1: expected word and count"),
        ("dog,-1\n", r"line 1: count '-1' is not >= 0"),
        ("word,count\n", r"has no rows"),
    ],
)
def test_a_bad_table_is_refused_naming_the_line(tmp_path: Path, content: str, message: str):
    path = tmp_path / "table.csv"
    path.write_text(content)
    with pytest.raises(analytics.AnalyticsInputError, match=message):
        analytics.read_word_frequencies(path)


def test_speech_coverage_is_the_share_of_caption_words_in_the_transcript():
    assert analytics.speech_coverage("A man says hello world", "Hello, world!") == 2 / 5
    assert analytics.speech_coverage("", "hello") is None


def test_corpus_speech_coverage_counts_only_clips_with_a_transcript():
    captions = [(1, "a man says hello"), (1, "hello there"), (2, "a dog barks")]
    result = analytics.corpus_speech_coverage(captions, {1: "hello there everyone"})
    assert result == {"mean": pytest.approx((1 / 4 + 2 / 2) / 2), "captions": 2, "clips": 1}
    assert analytics.corpus_speech_coverage(captions, {})["mean"] is None
