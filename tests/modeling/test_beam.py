"""Greedy and batched beam search: ordering, scores, entropies, limits, batching."""

from __future__ import annotations

import math

import pytest
import torch

from modeling.ml.data import collate
from modeling.ml.decoding import beam_search, greedy
from modeling.ml.models.base import Captioner
from modeling.ml.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    NEURAL,
    batch,
    items,
    one_torch_thread,  # noqa: F401
    tiny_model,
    vocabulary,
)

A, B = 4, 5  # the toy model's two words


class MarkovCaptioner(Captioner):
    """Next-word distribution depends only on the previous word: a known search space."""

    def __init__(self, table: dict[int, dict[int, float]]) -> None:
        super().__init__()
        self.log_table = torch.full((6, 6), math.log(1e-6))
        for prev, row in table.items():
            for word, p in row.items():
                self.log_table[prev, word] = math.log(p)
        self.log_table = torch.log_softmax(self.log_table, dim=-1)

    def encode(self, batch):
        return {"clip": batch["features"][:, 0]}

    def step(self, memory, tokens, state):
        return self.log_table[tokens[:, -1]], {}


def _entropy(row: torch.Tensor) -> float:
    return float(-(row.exp() * row).sum())


def _toy_batch(n: int = 1):
    return {"features": torch.zeros(n, 1, 1), "feature_lengths": torch.ones(n, dtype=torch.long)}


# From <bos>, "a" is likelier than "b", but "a" leads nowhere certain while "b" ends surely:
# greedy says "a", the best two-word caption is "b".
TRAP = {BOS_ID: {A: 0.6, B: 0.4}, A: {EOS_ID: 0.34, A: 0.33, B: 0.33}, B: {EOS_ID: 0.99}}


def test_beam_search_finds_what_greedy_misses():
    model = MarkovCaptioner(TRAP)
    assert greedy(model, _toy_batch())[0].tokens == [A]
    best = beam_search(model, _toy_batch(), beam_size=2)[0][0]
    assert best.tokens == [B]
    table = model.log_table
    assert best.log_prob == pytest.approx(float(table[BOS_ID, B] + table[B, EOS_ID]), abs=1e-5)
    assert best.token_entropies == pytest.approx([_entropy(table[BOS_ID]), _entropy(table[B])])
    assert best.entropy == pytest.approx(sum(best.token_entropies) / 2)


def test_max_length_cuts_captions_and_marks_them_truncated():
    model = MarkovCaptioner({BOS_ID: {A: 0.9}, A: {A: 0.99}})
    hyps = beam_search(model, _toy_batch(), beam_size=3, max_length=4)[0]
    assert all(len(h.tokens) <= 4 for h in hyps)
    assert hyps[0].tokens == [A] * 4
    assert hyps[0].truncated
    assert len(hyps[0].token_log_probs) == 4  # no <eos> was emitted
    cut = greedy(model, _toy_batch(), max_length=4)[0]
    assert (cut.tokens, cut.truncated, len(cut.token_entropies)) == ([A] * 4, True, 4)


def test_pad_bos_and_unk_are_never_emitted():
    model = MarkovCaptioner({BOS_ID: {UNK_ID: 0.7, PAD_ID: 0.2, A: 0.1}, A: {EOS_ID: 1.0}})
    assert greedy(model, _toy_batch())[0].tokens == [A]
    assert all(
        h.tokens == [A] or UNK_ID not in h.tokens
        for h in beam_search(model, _toy_batch(), beam_size=3)[0]
    )


def test_length_penalty_changes_the_ranking_towards_longer_captions():
    # Ending at once costs log .4; every "a" costs log .6 and ending after it log .4, so the
    # mean per token improves with length while the sum gets worse. The longest caption is
    # the one cut at max_length (no <eos> cost at all).
    model = MarkovCaptioner({BOS_ID: {EOS_ID: 0.4, A: 0.6}, A: {A: 0.6, EOS_ID: 0.4}})
    raw = beam_search(model, _toy_batch(), beam_size=3, max_length=4, length_penalty=0.0)[0]
    normalised = beam_search(model, _toy_batch(), beam_size=3, max_length=4, length_penalty=1.0)
    assert raw[0].tokens == []
    assert normalised[0][0].tokens == [A] * 4
    assert [h.tokens for h in normalised[0][1:]] == [[A] * 3, [A] * 2]
    for hyp in normalised[0]:
        assert hyp.score == pytest.approx(hyp.log_prob / len(hyp.token_log_probs))


@pytest.mark.parametrize("name", [*NEURAL, "nn"])
def test_beam_returns_at_most_beam_size_hypotheses_best_first(name):
    vocab = vocabulary()
    model = tiny_model(name, vocab)
    results = beam_search(model, batch(vocab), beam_size=3, max_length=6)
    assert len(results) == 4
    for hyps in results:
        assert 1 <= len(hyps) <= 3
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        for hyp in hyps:
            assert len(hyp.tokens) <= 6
            assert not {PAD_ID, BOS_ID, EOS_ID} & set(hyp.tokens)
            assert math.isfinite(hyp.log_prob)
            assert len(hyp.token_entropies) == len(hyp.tokens) + (0 if hyp.truncated else 1)


@pytest.mark.parametrize("name", NEURAL)
def test_beam_scores_agree_with_teacher_forced_log_probs(name):
    vocab = vocabulary()
    model = tiny_model(name, vocab)
    data = batch(vocab, n=2)
    for row, hyps in enumerate(beam_search(model, data, beam_size=3, max_length=6)):
        for hyp in hyps:
            clip = {k: v[row : row + 1] for k, v in data.items()}
            ending = [] if hyp.truncated else [EOS_ID]
            clip["tokens"] = torch.tensor([[BOS_ID, *hyp.tokens, *ending]])
            with torch.no_grad():
                log_probs = torch.log_softmax(model(clip)[0, :-1], dim=-1)
            expected = log_probs.gather(1, clip["tokens"][0, 1:, None]).squeeze(1)
            assert hyp.token_log_probs == pytest.approx(expected.tolist(), abs=1e-4)
            assert hyp.log_prob == pytest.approx(float(expected.sum()), abs=1e-4)


@pytest.mark.parametrize("name", NEURAL)
def test_beam_of_one_without_length_penalty_is_greedy(name):
    vocab = vocabulary()
    model = tiny_model(name, vocab)
    data = batch(vocab)
    greedy_tokens = [h.tokens for h in greedy(model, data, max_length=6)]
    beam_tokens = [
        hyps[0].tokens
        for hyps in beam_search(model, data, beam_size=1, max_length=6, length_penalty=0.0)
    ]
    assert beam_tokens == greedy_tokens


def test_batching_does_not_change_the_hypotheses():
    vocab = vocabulary()
    model = tiny_model("tempatt", vocab)
    examples = items(vocab)[:3]
    together = beam_search(model, collate(examples), beam_size=3, max_length=6)
    for item, hyps in zip(examples, together, strict=True):
        alone = beam_search(model, collate([item]), beam_size=3, max_length=6)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in hyps]
        assert [h.score for h in alone] == pytest.approx([h.score for h in hyps], abs=1e-5)


def test_retrieval_gives_one_certain_hypothesis():
    vocab = vocabulary()
    model = tiny_model("nn", vocab)
    hyps = beam_search(model, collate(items(vocab)[:1]), beam_size=3)[0]
    assert len(hyps) == 1
    assert vocab.decode(hyps[0].tokens) == "a dog barks twice"
    assert hyps[0].log_prob == 0.0
    assert hyps[0].entropy == 0.0


def test_beam_size_must_be_positive():
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        beam_search(MarkovCaptioner(TRAP), _toy_batch(), beam_size=0)


def test_a_runs_length_normalisation_reaches_the_beam_ranking():
    # ending at once: log .6 (1 token); "a" then the end: log .4 + log 5/6 (2 tokens). By the
    # mean per token (1.0) the empty caption wins, by logp / len^1.15 (MAAC's code) "a" does.
    from types import SimpleNamespace

    from modeling.ml.infer import caption_clips
    from modeling.ml.presets import named_recipe

    model = MarkovCaptioner({BOS_ID: {EOS_ID: 0.6, A: 0.4}, A: {A: 1 / 6, EOS_ID: 5 / 6}})
    clips = [SimpleNamespace(clip_id=1, features=torch.zeros(1, 1), video=None)]
    code = named_recipe("maac", "maac-code").decoding.length_penalty
    assert code == 1.15
    plain = caption_clips(model, vocabulary(), clips, beam_size=3)[0]
    ranked = caption_clips(model, vocabulary(), clips, beam_size=3, length_penalty=code)[0]
    assert plain[0].tokens == []
    assert ranked[0].tokens == [A]
    assert ranked[0].score == pytest.approx(ranked[0].log_prob / 2**1.15)
