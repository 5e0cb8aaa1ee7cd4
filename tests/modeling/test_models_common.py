"""Behaviour every captioner shares: shapes, gradients, padding invariance, learning."""

from __future__ import annotations

import pytest
import torch

from modeling.ml.data import collate
from modeling.ml.models.base import caption_loss
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    NEURAL,
    batch,
    items,
    one_torch_thread,  # noqa: F401
    tiny_model,
    vocabulary,
)


@pytest.mark.parametrize("name", [*NEURAL, "nn"])
def test_forward_gives_next_word_logits_per_token(name):
    vocab = vocabulary()
    data = batch(vocab)
    logits = tiny_model(name, vocab)(data)
    assert logits.shape == (4, data["tokens"].size(1), len(vocab))
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("name", NEURAL)
def test_backward_reaches_every_parameter(name):
    vocab = vocabulary()
    model = tiny_model(name, vocab)
    data = batch(vocab)
    caption_loss(model(data), data["tokens"]).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert missing == []
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("name", [*NEURAL, "nn"])
def test_padding_does_not_change_the_outputs(name):
    vocab = vocabulary()
    model = tiny_model(name, vocab).eval()
    examples = items(vocab)
    alone = examples[4]  # 13 frames, 2 words, 1 attribute word: everything else pads it
    together = collate([examples[5], alone, examples[1]])
    row = 1
    # Garbage in the padding must not leak in either.
    length = alone.features.size(0)
    together["features"][row, length:] = 1e3
    with torch.no_grad():
        expected = model(collate([alone]))[0]
        got = model(together)[row, : expected.size(0)]
    assert together["features"].size(1) > length
    assert together["tokens"].size(1) > expected.size(0)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", NEURAL)
def test_loss_falls_when_overfitting_one_batch(name):
    vocab = vocabulary()
    model = tiny_model(name, vocab, dropout=0.0)
    data = batch(vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        loss = caption_loss(model(data), data["tokens"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]


@pytest.mark.parametrize("name", NEURAL)
def test_step_by_step_decoding_matches_teacher_forcing(name):
    vocab = vocabulary()
    model = tiny_model(name, vocab).eval()
    data = batch(vocab)
    with torch.no_grad():
        expected = torch.log_softmax(model(data), dim=-1)
        memory = model.encode(data)
        state = None
        for t in range(data["tokens"].size(1)):
            log_probs, state = model.step(memory, data["tokens"][:, : t + 1], state)
            real = data["tokens"][:, t] != 0
            torch.testing.assert_close(log_probs[real], expected[real, t], atol=1e-5, rtol=1e-4)


def test_training_mode_dropout_changes_outputs_and_eval_is_deterministic():
    vocab = vocabulary()
    model = tiny_model("tempatt", vocab, dropout=0.5)
    data = batch(vocab)
    assert not torch.equal(model(data), model(data))
    model.eval()
    assert torch.equal(model(data), model(data))
