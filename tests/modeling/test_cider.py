"""CIDEr-D reward: pycocoevalcap's numbers, with document frequencies fixed on a corpus."""

from __future__ import annotations

import pytest
from pycocoevalcap.cider.cider import Cider

from modeling.ml.cider import CiderD
from modeling.ml.vocab import tokenize

REFERENCES = {
    "a": ["a dog barks twice", "a dog is barking", "two barks from a dog"],
    "b": ["rain falls on a roof", "heavy rain on a roof while thunder rumbles"],
    "c": ["a car engine idles", "an engine idles and a car horn honks"],
    "d": ["birds chirp in the distance", "a bird chirps", "birds are singing"],
}
CANDIDATES = {
    "a": "a dog barks",
    "b": "rain falls on a roof while thunder rumbles",
    "c": "a car horn honks twice",
    "d": "a dog barks in the distance",
}


def _words(refs: dict[str, list[str]]) -> dict[str, list[list[str]]]:
    return {key: [tokenize(text) for text in texts] for key, texts in refs.items()}


def test_scores_equal_pycocoevalcaps_on_the_same_references():
    _, expected = Cider().compute_score(
        {k: [" ".join(tokenize(t)) for t in v] for k, v in REFERENCES.items()},
        {k: [" ".join(tokenize(v))] for k, v in CANDIDATES.items()},
    )
    scorer = CiderD(_words(REFERENCES))
    keys = list(REFERENCES)
    got = scorer.scores([tokenize(CANDIDATES[k]) for k in keys], keys)
    assert got == pytest.approx(list(expected), abs=1e-9)


def test_document_frequencies_come_from_the_corpus_not_the_batch():
    scorer = CiderD(_words(REFERENCES))
    alone = scorer.score(tokenize(CANDIDATES["b"]), "b")
    _, one_clip_batch = Cider().compute_score(
        {"b": [" ".join(tokenize(t)) for t in REFERENCES["b"]]},
        {"b": [" ".join(tokenize(CANDIDATES["b"]))]},
    )
    assert alone > 0
    assert one_clip_batch[0] == 0.0  # one document: every n-gram's idf is log(1/1) = 0


def test_a_reference_scores_higher_than_an_unrelated_caption():
    scorer = CiderD(_words(REFERENCES))
    assert scorer.score(tokenize("a dog is barking"), "a") > scorer.score(
        tokenize("birds are singing"), "a"
    )


def test_an_unknown_clip_is_named():
    with pytest.raises(KeyError, match="no references for clip 'zz'"):
        CiderD(_words(REFERENCES)).score(["a"], "zz")


def test_a_clip_without_references_is_refused():
    with pytest.raises(ValueError, match="clip 'x' has no reference captions"):
        CiderD({"x": []})
