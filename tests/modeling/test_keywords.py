"""MAAC keyword vocabulary from POS-tagged captions (tags given, no spaCy here)."""

from __future__ import annotations

import pytest
import torch

from modeling.ml.keywords import KeywordVocabulary, caption_keywords, top_keywords

# "Dogs bark while a man is making noises" as spaCy tags it.
DOGS = [
    ("Dogs", "NOUN", "dog"),
    ("bark", "VERB", "bark"),
    ("while", "SCONJ", "while"),
    ("a", "DET", "a"),
    ("man", "NOUN", "man"),
    ("is", "AUX", "be"),
    ("making", "VERB", "make"),
    ("noises", "NOUN", "noise"),
]
DOG = [("A", "DET", "a"), ("dog", "NOUN", "dog"), ("barks", "VERB", "bark")]
RAIN = [("Rain", "NOUN", "rain"), ("falls", "VERB", "fall"), ("on", "ADP", "on")]
BIRDS = [("Birds", "NOUN", "bird"), ("are", "AUX", "be"), ("chirping", "VERB", "chirp")]


def test_nouns_stay_as_written_and_verbs_become_lemmas():
    assert caption_keywords(DOG) == ["dog", "bark"]
    assert caption_keywords(BIRDS) == ["birds", "chirp"]


def test_generic_words_and_other_parts_of_speech_are_dropped():
    # "making" (make) and "noises" are generic; "is" is AUX; "while", "a" are not nouns/verbs.
    assert caption_keywords(DOGS) == ["dogs", "bark", "man"]


def test_custom_stop_list_replaces_the_default():
    assert caption_keywords(DOGS, stop_words=frozenset({"man"})) == [
        "dogs",
        "bark",
        "make",
        "noises",
    ]


def test_tokens_that_are_not_words_are_skipped():
    assert caption_keywords([("123", "NOUN", "123"), ("--", "NOUN", "--")]) == []


def test_vocabulary_keeps_the_most_frequent_with_alphabetical_ties():
    vocab = KeywordVocabulary.build([DOGS, DOG, RAIN, DOG, BIRDS], size=4)
    # bark x3, dog x2, then birds, chirp, dogs, fall, man, rain once each.
    assert vocab.words == ["bark", "dog", "birds", "chirp"]


def test_vocabulary_size_caps_the_keyword_count():
    assert len(KeywordVocabulary.build([DOGS, DOG, RAIN, BIRDS], size=300)) == 8


def test_targets_are_the_multi_hot_union_over_a_clips_captions():
    vocab = KeywordVocabulary.build([DOGS, DOG, RAIN, BIRDS])
    target = vocab.targets([DOG, RAIN])
    assert target.dtype == torch.float32
    assert target.shape == (len(vocab),)
    hot = {vocab.words[i] for i in target.nonzero().flatten().tolist()}
    assert hot == {"dog", "bark", "rain", "fall"}


def test_unknown_keywords_are_not_encoded():
    vocab = KeywordVocabulary.build([DOG])
    assert vocab.words == ["bark", "dog"]
    assert vocab.encode(["dog", "thunder", "bark", "dog"]) == [1, 0]


def test_vocabulary_round_trips_through_a_dict():
    vocab = KeywordVocabulary.build([DOGS, RAIN])
    assert KeywordVocabulary.from_dict(vocab.to_dict()) == vocab


def test_captions_without_nouns_or_verbs_give_a_clear_error():
    with pytest.raises(ValueError, match="no nouns or verbs"):
        KeywordVocabulary.build([[("a", "DET", "a")]])


def test_top_keywords_are_the_k_most_probable_best_first():
    probs = torch.tensor([[0.1, 0.9, 0.3, 0.7], [0.8, 0.0, 0.5, 0.2]])
    assert top_keywords(probs, 2).tolist() == [[1, 3], [0, 2]]
    with pytest.raises(ValueError, match="k=5"):
        top_keywords(probs, 5)
