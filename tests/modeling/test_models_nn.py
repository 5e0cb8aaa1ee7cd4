"""1NN retrieval: nearest by L2 between time means, caption and attribute retrieval, bank."""

from __future__ import annotations

import math

import pytest
import torch

from modeling.ml.data import CaptionItem, collate
from modeling.ml.decoding import beam_search, greedy
from modeling.ml.models.nn_retrieval import NearestNeighbourCaptioner, with_retrieved_attributes
from modeling.ml.presets import model_preset
from modeling.ml.registry import build_model
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    items,
    one_torch_thread,  # noqa: F401
    tiny_model,
    vocabulary,
)


def _constant_clip(
    value: float, frames: int, tokens: list[int], clip_id: str, attributes: list[int]
) -> CaptionItem:
    return CaptionItem(torch.full((frames, 8), value), tokens, clip_id, attributes)


def test_a_training_clip_retrieves_its_own_caption():
    vocab = vocabulary()
    model = tiny_model("nn", vocab)
    examples = items(vocab)
    captions = [vocab.decode(h.tokens) for h in greedy(model, collate(examples))]
    assert captions == [vocab.decode(item.tokens) for item in examples]


def test_the_nearest_clip_is_chosen_by_l2_between_time_means():
    vocab = vocabulary()
    model = build_model("nn", model_preset("nn", "tiny"), vocab_size=len(vocab))
    quiet = _constant_clip(0.0, 4, vocab.encode("birds chirp"), "quiet", [])
    loud = _constant_clip(10.0, 9, vocab.encode("a siren wails"), "loud", [])
    model.prepare([quiet, loud])
    query = CaptionItem(torch.tensor([[4.0] * 8, [8.0] * 8]), vocab.encode("x"), "q")  # mean 6
    assert vocab.decode(greedy(model, collate([query]))[0].tokens) == "a siren wails"


def test_the_bank_keeps_one_entry_per_clip():
    vocab = vocabulary()
    model = build_model("nn", model_preset("nn", "tiny"), vocab_size=len(vocab))
    assert isinstance(model, NearestNeighbourCaptioner)
    first = _constant_clip(1.0, 3, vocab.encode("birds chirp"), "a", [])
    second = _constant_clip(1.0, 3, vocab.encode("a dog barks"), "a", [])
    model.prepare([first, second])
    assert model.bank_captions.size(0) == 1
    assert model.clip_ids == ["a"]


def test_attribute_retrieval_can_exclude_the_query_clip():
    vocab = vocabulary()
    model = build_model("nn", model_preset("nn", "tiny"), vocab_size=len(vocab))
    assert isinstance(model, NearestNeighbourCaptioner)
    dog, bird = vocab.encode_words(["Dog"]), vocab.encode_words(["Bird"])
    model.prepare(
        [
            _constant_clip(0.0, 3, vocab.encode("a dog barks"), "dog", dog),
            _constant_clip(1.0, 3, vocab.encode("birds chirp"), "bird", bird),
        ]
    )
    features, lengths = torch.zeros(1, 3, 8), torch.tensor([3])
    attrs, counts = model.retrieve_attributes(features, lengths)
    assert attrs[0, : counts[0]].tolist() == dog
    attrs, counts = model.retrieve_attributes(features, lengths, exclude=["dog"])
    assert attrs[0, : counts[0]].tolist() == bird


def test_with_retrieved_attributes_never_hands_a_clip_its_own_labels():
    vocab = vocabulary()
    examples = items(vocab)
    model = tiny_model("nn", vocab)
    assert isinstance(model, NearestNeighbourCaptioner)
    retrieved = with_retrieved_attributes(examples, model)
    own = {item.clip_id: item.attributes for item in examples}
    assert [item.clip_id for item in retrieved] == list(own)
    assert all(item.attributes != own[item.clip_id] for item in retrieved)
    assert all(item.attributes in own.values() for item in retrieved)


def test_the_bank_reloads_strictly_into_a_fresh_model():
    vocab = vocabulary()
    model = tiny_model("nn", vocab).eval()
    fresh = build_model("nn", model.config)
    fresh.load_state_dict(model.state_dict(), strict=True)
    data = collate(items(vocab))
    assert fresh.clip_ids == model.clip_ids
    torch.testing.assert_close(fresh(data), model(data))


def test_an_empty_bank_says_prepare_was_not_called():
    vocab = vocabulary()
    model = build_model("nn", model_preset("nn", "tiny"), vocab_size=len(vocab))
    with pytest.raises(RuntimeError, match="call prepare"):
        model.encode(collate(items(vocab)))


def test_the_retrieval_model_has_nothing_to_train():
    assert not tiny_model("nn", vocabulary()).trainable


def test_a_suggestion_is_as_sure_as_the_nearest_clip_is_clearly_nearest():
    vocab = vocabulary()
    model = build_model("nn", model_preset("nn", "tiny"), vocab_size=len(vocab))
    model.prepare(
        [
            _constant_clip(0.0, 3, vocab.encode("birds chirp"), "quiet", []),
            _constant_clip(4.0, 3, vocab.encode("a siren wails"), "loud", []),
        ]
    )
    # per feature 1 from "quiet" and 3 from "loud": c = 3 / (1 + 3)
    between = CaptionItem(torch.full((2, 8), 1.0), vocab.encode("x"), "q")
    exact = CaptionItem(torch.full((2, 8), 4.0), vocab.encode("x"), "e")
    beams = beam_search(model, collate([between, exact]), beam_size=3)
    best, sure = beams[0][0], beams[1][0]
    assert vocab.decode(best.tokens) == "birds chirp"
    assert best.score == pytest.approx(math.log(0.75))  # per word, so the caption's c
    assert best.log_prob == pytest.approx(3 * math.log(0.75))  # "birds chirp" <eos>
    assert best.entropy == pytest.approx(-0.75 * math.log(0.75))
    assert (vocab.decode(sure.tokens), sure.score, sure.entropy) == ("a siren wails", 0.0, 0.0)
    assert [len(b) for b in beams] == [1, 1]  # no made-up alternatives


def test_a_bank_of_one_clip_is_certain():
    vocab = vocabulary()
    model = build_model("nn", model_preset("nn", "tiny"), vocab_size=len(vocab))
    assert isinstance(model, NearestNeighbourCaptioner)
    model.prepare([_constant_clip(0.0, 3, vocab.encode("birds chirp"), "only", [])])
    rows, confidence = model.nearest_with_confidence(torch.full((1, 2, 8), 9.0), torch.tensor([2]))
    assert rows.tolist() == [0]
    assert confidence.tolist() == [1.0]
