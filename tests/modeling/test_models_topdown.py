"""TopDown: attention flow (eq. 5-9) on hand-made tensors, and the model's variants."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from modeling.ml.config import TopDownConfig
from modeling.ml.data import collate
from modeling.ml.models.topdown import attention_flow
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    batch,
    items,
    one_torch_thread,  # noqa: F401
    tiny_model,
    vocabulary,
)


def _w_alpha(*weights: float) -> nn.Linear:
    layer = nn.Linear(len(weights), 1, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([weights]))
    return layer


def _softmax(xs: list[float]) -> list[float]:
    exps = [math.exp(x - max(xs)) for x in xs]
    return [e / sum(exps) for e in exps]


def test_attention_flow_matches_equations_5_to_9_by_hand():
    audio, words = [1.0, 2.0], [3.0, -1.0]  # h^a2_t and h^w_n, D = 1
    flow = attention_flow(
        torch.tensor([[[a] for a in audio]]),
        torch.tensor([[[w] for w in words]]),
        torch.tensor([[True, True]]),
        torch.tensor([[True, True]]),
        _w_alpha(1.0, 2.0, 3.0),  # W_a [h^a ; h^w ; h^a * h^w]: distinct weights pin the order
    )
    s = [[1 * a + 2 * w + 3 * a * w for w in words] for a in audio]  # eq. 5
    torch.testing.assert_close(flow.similarity[0], torch.tensor(s))
    a = [_softmax(row) for row in s]  # eq. 6
    torch.testing.assert_close(flow.word_to_audio[0], torch.tensor(a))
    attended_words = [sum(a_tn * w for a_tn, w in zip(row, words, strict=True)) for row in a]
    b = _softmax([max(row) for row in s])  # eq. 8
    torch.testing.assert_close(flow.audio_to_word[0], torch.tensor(b))
    attended_audio = sum(b_t * h for b_t, h in zip(b, audio, strict=True))  # eq. 9
    expected = [
        [h, hw, h * hw, h * attended_audio] for h, hw in zip(audio, attended_words, strict=True)
    ]
    torch.testing.assert_close(flow.flow[0], torch.tensor(expected))


def test_attention_flow_ignores_padded_words_and_frames():
    w_alpha = _w_alpha(0.5, -1.0, 2.0, 0.3, 0.1, -0.2)
    h_audio = torch.randn(1, 3, 2)
    h_words = torch.randn(1, 2, 2)
    reference = attention_flow(
        h_audio,
        h_words,
        torch.ones(1, 3, dtype=torch.bool),
        torch.ones(1, 2, dtype=torch.bool),
        w_alpha,
    )
    padded = attention_flow(
        torch.cat([h_audio, torch.full((1, 1, 2), 50.0)], dim=1),
        torch.cat([h_words, torch.full((1, 1, 2), 50.0)], dim=1),
        torch.tensor([[True, True, True, False]]),
        torch.tensor([[True, True, False]]),
        w_alpha,
    )
    torch.testing.assert_close(padded.flow[:, :3], reference.flow)
    assert padded.word_to_audio[0, :, 2].abs().max() == 0
    assert padded.audio_to_word[0, 3] == 0


def test_attention_flow_without_words_gives_zero_word_context_and_uniform_frames():
    flow = attention_flow(
        torch.randn(1, 3, 2),
        torch.zeros(1, 1, 2),
        torch.tensor([[True, True, False]]),
        torch.tensor([[False]]),
        _w_alpha(*[1.0] * 6),
    )
    assert torch.isfinite(flow.flow).all()
    torch.testing.assert_close(flow.flow[0, :, 2:6], torch.zeros(3, 4))  # h~w and h^a2 * h~w
    torch.testing.assert_close(flow.audio_to_word[0], torch.tensor([0.5, 0.5, 0.0]))


def test_aligned_attention_memory_is_the_flow_over_all_frames():
    vocab = vocabulary()
    model = tiny_model("topdown", vocab)
    data = batch(vocab)
    memory = model.encode(data)
    assert isinstance(model.config, TopDownConfig)
    encoder_dim = model.config.encoder_dim
    assert memory["keys"].shape == (4, data["features"].size(1), 4 * 2 * encoder_dim)


def test_attribute_words_change_the_caption_distribution():
    vocab = vocabulary()
    model = tiny_model("topdown", vocab).eval()
    data = batch(vocab)
    other = dict(
        data,
        attributes=data["attributes"].flip(0),
        attribute_lengths=data["attribute_lengths"].flip(0),
    )
    assert not torch.allclose(model(data), model(other))


def test_plain_topdown_needs_no_attributes():
    vocab = vocabulary()
    model = tiny_model("topdown", vocab, aligned_attention=False)
    data = batch(vocab)
    del data["attributes"], data["attribute_lengths"]
    assert model(data).shape[:2] == data["tokens"].shape


def test_aligned_topdown_says_when_attributes_are_missing():
    vocab = vocabulary()
    data = batch(vocab)
    del data["attributes"]
    with pytest.raises(ValueError, match="needs batch\\['attributes'\\]"):
        tiny_model("topdown", vocab)(data)


def test_a_batch_without_any_attribute_words_still_decodes():
    vocab = vocabulary()
    examples = [dataclasses.replace(item, attributes=[]) for item in items(vocab)[:3]]
    data = collate(examples)
    assert data["attributes"].shape == (3, 0)
    assert torch.isfinite(tiny_model("topdown", vocab)(data)).all()


def test_two_feature_levels_use_mid_features():
    vocab = vocabulary()
    model = tiny_model("topdown", vocab, mid_feature_dim=5)
    examples = [
        dataclasses.replace(item, mid_features=torch.randn(item.features.size(0), 5))
        for item in items(vocab)[:3]
    ]
    data = collate(examples)
    assert model.high_mlp is None
    assert model(data).shape[:2] == data["tokens"].shape
    del data["mid_features"]
    with pytest.raises(ValueError, match="mid_features"):
        model(data)


def test_the_mid_level_has_its_own_frame_rate():
    # VGGish behind TopDown: one fc2 vector per patch, six conv4 steps per patch
    vocab = vocabulary()
    model = tiny_model("topdown", vocab, mid_feature_dim=5).eval()
    data = collate(items(vocab)[:2])
    data["features"] = torch.randn(2, 3, data["features"].size(2))
    data["feature_lengths"] = torch.tensor([3, 2])
    data["mid_features"] = torch.randn(2, 18, 5)
    data["mid_feature_lengths"] = torch.tensor([18, 12])
    with torch.no_grad():
        memory = model.encode(data)
        logits = model(data)
        padded = dict(data, mid_features=data["mid_features"].clone())
        padded["mid_features"][1, 12:] = 1e3  # beyond the second clip's mid level
        padded["features"] = data["features"].clone()
        padded["features"][1, 2:] = 1e3  # beyond its high level
        again = model(padded)
    assert memory["mask"].tolist() == [[True] * 18, [True] * 12 + [False] * 6]
    assert memory["keys"].shape[1] == 18
    torch.testing.assert_close(again, logits)
