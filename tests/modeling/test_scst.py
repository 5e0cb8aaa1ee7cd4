"""Self-critical sequence training: reward/baseline math, the sign of the update, learning."""

from __future__ import annotations

import pytest
import torch

from modeling.ml.decoding import greedy
from modeling.ml.scst import decode_with_grad, scst_loss
from modeling.ml.vocab import BOS_ID, EOS_ID, PAD_ID
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    batch,
    one_torch_thread,  # noqa: F401
    tiny_model,
    vocabulary,
)


class Scripted:
    """Reward callable: the baseline call (first) gets ``baseline``, samples get ``sample``."""

    def __init__(self, baseline: float, sample: float) -> None:
        self.values = [baseline, sample]
        self.calls: list[tuple[list[list[int]], list[int]]] = []

    def __call__(self, candidates, rows):
        self.calls.append((candidates, rows))
        return [self.values[len(self.calls) - 1]] * len(candidates)


def _sequence_log_probs(model, data, captions: list[list[int]]) -> torch.Tensor:
    """Teacher-forced log p(caption) per clip, <eos> included."""
    width = max(len(c) for c in captions) + 2
    tokens = torch.full((len(captions), width), PAD_ID, dtype=torch.long)
    for row, words in enumerate(captions):
        tokens[row, : len(words) + 2] = torch.tensor([BOS_ID, *words, EOS_ID])
    log_probs = torch.log_softmax(model(dict(data, tokens=tokens)), dim=-1)[:, :-1]
    picked = log_probs.gather(2, tokens[:, 1:].unsqueeze(2)).squeeze(2)
    return (picked * (tokens[:, 1:] != PAD_ID)).sum(1)


def _model_and_data(seed: int = 0):
    vocab = vocabulary()
    model = tiny_model("tempatt", vocab, seed=seed, dropout=0.0)
    return vocab, model, batch(vocab)


@pytest.mark.parametrize(("baseline", "sample", "direction"), [(0.0, 1.0, 1), (1.0, 0.0, -1)])
def test_a_step_makes_better_than_greedy_samples_likelier_and_worse_ones_rarer(
    baseline, sample, direction
):
    _, model, data = _model_and_data()
    torch.manual_seed(3)
    out = scst_loss(model, data, Scripted(baseline, sample), max_length=8)
    assert out.advantages.tolist() == [sample - baseline] * 4
    captions = out.samples.words
    with torch.no_grad():
        before = _sequence_log_probs(model, data, captions)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    optimizer.zero_grad()
    out.loss.backward()
    optimizer.step()
    with torch.no_grad():
        after = _sequence_log_probs(model, data, captions)
    assert (torch.sign(after - before) == direction).all()


def test_loss_is_minus_advantage_times_mean_sampled_token_log_prob():
    _, model, data = _model_and_data()
    torch.manual_seed(4)
    out = scst_loss(model, data, Scripted(0.25, 1.0), max_length=8)
    samples = out.samples
    # Every sampled token (its <eos> included) is counted, nothing after it.
    assert samples.mask.sum(1).tolist() == [len(w) + 1 for w in samples.words]
    expected = -(0.75 * samples.log_probs[samples.mask]).sum() / samples.mask.sum()
    torch.testing.assert_close(out.loss, expected)
    assert out.sample_reward == 1.0
    assert out.baseline_reward == 0.25


def test_baseline_is_the_greedy_caption_of_each_clip():
    _, model, data = _model_and_data()
    reward = Scripted(0.0, 0.0)
    scst_loss(model, data, reward, max_length=8)
    baseline_candidates, baseline_rows = reward.calls[0]
    assert baseline_candidates == [h.tokens for h in greedy(model, data, max_length=8)]
    assert baseline_rows == [0, 1, 2, 3]


def test_equal_rewards_give_no_gradient():
    _, model, data = _model_and_data()
    out = scst_loss(model, data, Scripted(0.7, 0.7), max_length=8)
    out.loss.backward()
    assert out.loss.item() == 0.0
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


def test_several_samples_per_clip_share_the_clips_baseline():
    _, model, data = _model_and_data()
    reward = Scripted(0.5, 1.0)
    out = scst_loss(model, data, reward, max_length=8, n_samples=3)
    assert reward.calls[1][1] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert out.advantages.shape == (12,)


def test_sampling_never_emits_specials_and_stops_at_max_length():
    _, model, data = _model_and_data()
    torch.manual_seed(0)
    sampled = decode_with_grad(model, data, max_length=3, n_per_clip=5)
    assert all(len(words) <= 3 for words in sampled.words)
    assert all(w >= 4 for words in sampled.words for w in words)
    assert sampled.log_probs.requires_grad


def test_model_mode_is_restored_after_the_greedy_baseline():
    _, model, data = _model_and_data()
    model.train()
    scst_loss(model, data, Scripted(0.0, 1.0), max_length=4)
    assert model.training


def test_reward_of_the_wrong_size_is_refused():
    _, model, data = _model_and_data()
    with pytest.raises(ValueError, match=r"reward_fn returned \(2,\) rewards for 4 captions"):
        scst_loss(model, data, lambda candidates, rows: [0.0, 1.0], max_length=4)


def test_training_on_a_reward_raises_the_greedy_reward():
    vocab, model, data = _model_and_data()
    dog = vocab.id("dog")

    def reward(candidates, rows):  # share of words that are "dog"
        return [sum(w == dog for w in c) / max(1, len(c)) for c in candidates]

    def greedy_reward() -> float:
        hyps = greedy(model, data, max_length=6)
        return sum(reward([h.tokens], [0])[0] for h in hyps) / len(hyps)

    torch.manual_seed(0)
    start = greedy_reward()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(30):
        model.train()
        out = scst_loss(model, data, reward, max_length=6, n_samples=4)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    assert start < 0.5
    assert greedy_reward() > 0.9
