from __future__ import annotations

import pytest

from modeling.ml.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID, Vocabulary, tokenize


def test_tokenize_lowercases_and_drops_punctuation():
    assert tokenize("A dog barks, then it's QUIET!") == [
        "a",
        "dog",
        "barks",
        "then",
        "it's",
        "quiet",
    ]


def test_specials_come_first_with_fixed_ids():
    vocab = Vocabulary.build(["a dog"])
    assert vocab.words[:4] == list(SPECIALS)
    assert (vocab.id("<pad>"), vocab.id("<bos>"), vocab.id("<eos>"), vocab.id("<unk>")) == (
        PAD_ID,
        BOS_ID,
        EOS_ID,
        UNK_ID,
    )


def test_build_keeps_words_seen_min_count_times_most_frequent_first():
    vocab = Vocabulary.build(["a dog barks", "a dog howls", "a cat"], min_count=2)
    assert vocab.words[4:] == ["a", "dog"]


def test_build_is_deterministic_for_ties():
    one = Vocabulary.build(["zebra apple", "mango"])
    two = Vocabulary.build(["mango", "apple zebra"])
    assert one.words == two.words == [*SPECIALS, "apple", "mango", "zebra"]


def test_build_accepts_pretokenised_captions():
    assert Vocabulary.build([["a", "dog"]]).words[4:] == ["a", "dog"]


def test_encode_wraps_in_bos_eos_and_maps_unknown_words_to_unk():
    vocab = Vocabulary.build(["a dog barks"])
    assert vocab.encode("A dog meows") == [BOS_ID, vocab.id("a"), vocab.id("dog"), UNK_ID, EOS_ID]


def test_encode_truncates_to_max_length_words():
    vocab = Vocabulary.build(["one two three four"], max_length=2)
    assert vocab.encode("one two three four") == [BOS_ID, vocab.id("one"), vocab.id("two"), EOS_ID]


def test_decode_stops_at_eos_and_skips_pad_and_bos():
    vocab = Vocabulary.build(["a dog barks"])
    ids = [BOS_ID, vocab.id("a"), PAD_ID, vocab.id("dog"), EOS_ID, vocab.id("barks")]
    assert vocab.decode(ids) == "a dog"


def test_encode_then_decode_round_trips_known_text():
    vocab = Vocabulary.build(["rain falls on a tin roof"])
    assert vocab.decode(vocab.encode("Rain falls on a tin roof.")) == "rain falls on a tin roof"


def test_encode_words_gives_distinct_known_label_words():
    vocab = Vocabulary.build(["a car horn honks", "a vehicle passes"])
    ids = vocab.encode_words(["Vehicle horn, car horn, honking", "Zebra"])
    assert [vocab.words[i] for i in ids] == ["vehicle", "horn", "car"]


def test_dict_round_trip_gives_an_equal_vocabulary():
    vocab = Vocabulary.build(["a dog barks"], max_length=7)
    again = Vocabulary.from_dict(vocab.to_dict())
    assert again == vocab
    assert again.max_length == 7


def test_from_dict_names_a_missing_key():
    with pytest.raises(ValueError, match="max_length"):
        Vocabulary.from_dict({"words": list(SPECIALS)})


def test_a_vocabulary_must_start_with_the_specials():
    with pytest.raises(ValueError, match="must start with"):
        Vocabulary(["dog", *SPECIALS])


def test_duplicate_words_are_rejected():
    with pytest.raises(ValueError, match="duplicate words in vocabulary: dog"):
        Vocabulary([*SPECIALS, "dog", "dog"])
