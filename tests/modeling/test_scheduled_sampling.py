"""Scheduled sampling: the rate's schedule, the mixed inputs, and the trainer feeding them in
the cross-entropy stages only."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from modeling.ml.config import RunConfig
from modeling.ml.presets import model_preset, train_preset
from modeling.ml.registry import build_model
from modeling.ml.scheduled_sampling import mixed_tokens, sampling_probability, scheduled_batch
from modeling.ml.trainer import train
from modeling.ml.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    batch,
    items,
    one_torch_thread,  # noqa: F401
    vocabulary,
)

TOKENS = torch.tensor([[BOS_ID, 7, 8, 9, EOS_ID], [BOS_ID, 7, EOS_ID, PAD_ID, PAD_ID]])


def _logits_predicting(word: int, *, shape=(2, 5, 12)) -> torch.Tensor:
    logits = torch.zeros(shape)
    logits[..., word] = 5.0
    return logits


def test_the_rate_rises_linearly_to_its_value_at_the_stages_last_epoch():
    # MAAC's code: teacher forcing 1 - 0.3 * epoch / max_epoch, epochs counted from 1
    assert [sampling_probability(0.3, i, 3) for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert sampling_probability(0.0, 2, 3) == 0.0


def test_at_rate_0_the_inputs_are_the_captions_themselves():
    assert mixed_tokens(TOKENS, _logits_predicting(11), 0.0) is TOKENS


def test_at_rate_1_every_word_after_bos_is_the_models_own_prediction():
    mixed = mixed_tokens(TOKENS, _logits_predicting(11), 1.0)
    assert mixed.tolist() == [
        [BOS_ID, 11, 11, 11, 11],
        [BOS_ID, 11, 11, PAD_ID, PAD_ID],  # <pad> stays <pad>: the caption's length holds
    ]


def test_a_prediction_of_a_special_token_is_never_fed():
    logits = _logits_predicting(UNK_ID)
    logits[..., PAD_ID] = logits[..., BOS_ID] = 9.0
    logits[..., 10] = 1.0  # the likeliest word a caption may hold
    mixed = mixed_tokens(TOKENS, logits, 1.0)
    assert set(mixed[:, 1:].flatten().tolist()) <= {10, PAD_ID}


def test_a_rate_between_replaces_about_that_share_of_the_words():
    tokens = torch.full((200, 21), 7)
    tokens[:, 0] = BOS_ID
    torch.manual_seed(0)
    mixed = mixed_tokens(tokens, _logits_predicting(11, shape=(200, 21, 12)), 0.3)
    share = float((mixed[:, 1:] == 11).float().mean())
    assert share == pytest.approx(0.3, abs=0.03)


def test_scheduled_batch_feeds_the_models_own_predictions_and_keeps_the_targets():
    vocab = vocabulary()
    model = build_model("lstm", model_preset("lstm", "tiny"), vocab_size=len(vocab))
    data = batch(vocab)
    torch.manual_seed(0)
    fed = scheduled_batch(model, data, 1.0)
    assert not torch.equal(fed["tokens"], data["tokens"])
    assert torch.equal(fed["tokens"][:, 0], data["tokens"][:, 0])
    assert torch.equal(fed["tokens"] == PAD_ID, data["tokens"] == PAD_ID)
    assert scheduled_batch(model, data, 0.0) is data


def _trained_inputs(tmp_path, rate: float) -> tuple[list[dict], list[bool]]:
    """The step events and, per training forward pass with gradients, whether the tokens
    the model read differ from the batch's captions."""
    vocab = vocabulary()
    config = dataclasses.replace(train_preset("tiny"), epochs=2, scheduled_sampling=rate)
    run = RunConfig(model_name="lstm", model=model_preset("lstm", "tiny"), train=config)
    steps: list[dict] = []
    changed: list[bool] = []
    captions = {tuple(item.tokens) for item in items(vocab)}
    original = torch.nn.Module.__call__

    def spy(module, *args, **kwargs):
        if type(module).__name__ == "LSTMCaptioner" and torch.is_grad_enabled():
            rows = {tuple(t for t in row if t != PAD_ID) for row in args[0]["tokens"].tolist()}
            changed.append(not rows <= captions)
        return original(module, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.nn.Module, "__call__", spy)
        train(
            run=run,
            vocab=vocab,
            train_items=items(vocab),
            out_dir=tmp_path,
            callbacks={"step": [lambda trainer, info: steps.append(info)]},
        )
    return steps, changed


def test_the_trainer_feeds_its_own_predictions_at_the_scheduled_rate(tmp_path):
    steps, changed = _trained_inputs(tmp_path, 1.0)
    by_epoch = {info["epoch"]: info["figures"]["sampling_p"] for info in steps}
    assert by_epoch == {0: 0.5, 1: 1.0}  # rising to 1.0 over the 2 caption epochs
    assert any(changed)


def test_without_scheduled_sampling_the_trainer_feeds_the_captions(tmp_path):
    steps, changed = _trained_inputs(tmp_path, 0.0)
    assert changed
    assert not any(changed)
    assert all(info["figures"] == {} for info in steps)
