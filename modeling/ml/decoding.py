"""Greedy and batched beam search over any Captioner's ``encode``/``step`` interface.

Both return, per clip, hypotheses with their sequence log-probability and per-token entropy of
the model's predictive distribution: the active-learning code ranks clips by these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from modeling.ml.models.base import Batch, Captioner
from modeling.ml.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID


@dataclass
class Hypothesis:
    """One decoded caption."""

    tokens: list[int]  # word ids, without <bos> and <eos>
    log_prob: float  # sum of the emitted tokens' log-probabilities, <eos> included if emitted
    score: float  # ranking key: log_prob / len(token_log_probs) ** length_penalty
    token_log_probs: list[float] = field(default_factory=list)  # per emitted token, <eos> too
    token_entropies: list[float] = field(default_factory=list)  # nats, same positions
    # True when max_length words were reached before <eos>: the caption was cut, not ended.
    truncated: bool = False

    @property
    def entropy(self) -> float:
        """Mean per-token entropy (nats) over the emitted tokens."""
        return sum(self.token_entropies) / max(1, len(self.token_entropies))


def _hypothesis(
    words: list[int], lps: list[float], ents: list[float], *, truncated: bool, length_penalty: float
) -> Hypothesis:
    log_prob = sum(lps)
    return Hypothesis(
        words, log_prob, log_prob / max(1, len(lps)) ** length_penalty, lps, ents, truncated
    )


def _entropy(log_probs: Tensor) -> Tensor:
    """(N, V) log-probabilities -> (N,) entropies; -inf entries (p = 0) contribute nothing."""
    probs = log_probs.exp()
    return -torch.where(probs > 0, probs * log_probs, torch.zeros_like(probs)).sum(-1)


def _never_emit(log_probs: Tensor) -> Tensor:
    """Forbid <pad>, <bos> and <unk>: a suggestion containing them is of no use to anyone.

    Entropies are taken before this, from the model's own distribution.
    """
    log_probs = log_probs.clone()
    log_probs[:, [PAD_ID, BOS_ID, UNK_ID]] = float("-inf")
    return log_probs


def _word_budget(model: Captioner, max_length: int) -> int:
    """Words allowed before <eos> is forced, respecting the model's longest prefix."""
    if max_length < 1:
        raise ValueError(f"max_length must be at least 1, got {max_length}")
    limit = model.max_prefix_length
    # A finished caption is <bos> + max_length words + <eos>: keep that within the model's
    # table so scores are comparable with what it was trained on.
    return min(max_length, limit - 1) if limit is not None else max_length


@torch.no_grad()
def greedy(model: Captioner, batch: Batch, *, max_length: int = 30) -> list[Hypothesis]:
    """Most likely word at every step; one hypothesis per clip (score = log_prob)."""
    model.eval()
    max_length = _word_budget(model, max_length)
    memory = model.encode(batch)
    b = batch["features"].size(0)
    device = batch["features"].device
    tokens = torch.full((b, 1), BOS_ID, dtype=torch.long, device=device)
    finished = torch.zeros(b, dtype=torch.bool, device=device)
    log_prob_steps, entropy_steps = [], []
    state = None
    for _ in range(max_length):
        log_probs, state = model.step(memory, tokens, state)
        entropy_steps.append(_entropy(log_probs))
        log_probs = _never_emit(log_probs)
        next_words = log_probs.argmax(dim=-1).masked_fill(finished, PAD_ID)
        log_prob_steps.append(log_probs.gather(1, next_words.unsqueeze(1)).squeeze(1))
        tokens = torch.cat([tokens, next_words.unsqueeze(1)], dim=1)
        finished |= next_words == EOS_ID
        if bool(finished.all()):
            break
    step_log_probs = torch.stack(log_prob_steps, dim=1).tolist()
    step_entropies = torch.stack(entropy_steps, dim=1).tolist()
    hypotheses = []
    for row, words in enumerate(tokens[:, 1:].tolist()):
        ended = EOS_ID in words
        n = words.index(EOS_ID) + 1 if ended else len(words)
        hypotheses.append(
            _hypothesis(
                words[: n - 1] if ended else words,
                step_log_probs[row][:n],
                step_entropies[row][:n],
                truncated=not ended,
                length_penalty=0.0,
            )
        )
    return hypotheses


@torch.no_grad()
def beam_search(
    model: Captioner,
    batch: Batch,
    *,
    beam_size: int = 3,
    max_length: int = 30,
    length_penalty: float = 1.0,
) -> list[list[Hypothesis]]:
    """Batched beam search; per clip at most ``beam_size`` hypotheses, best score first.

    All clips' beams advance together as one (B * K) batch. Each step keeps the 2K best
    candidates per clip: those ending in <eos> and ranked within the top K become finished
    hypotheses, the best K others continue (there are always K, as only K candidates can be
    <eos>). A clip stops once it has K finished hypotheses and no live beam could still rank
    above the worst of them; beams still alive after ``max_length`` words are kept as truncated
    hypotheses. ``length_penalty`` 0 ranks by raw log-probability, 1 by the mean per token.
    Hypotheses of probability zero (-inf) are never returned.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    model.eval()
    max_length = _word_budget(model, max_length)
    k = beam_size
    b = batch["features"].size(0)
    device = batch["features"].device
    memory = {
        name: value.repeat_interleave(k, dim=0) for name, value in model.encode(batch).items()
    }
    tokens = torch.full((b * k, 1), BOS_ID, dtype=torch.long, device=device)
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one alive or the first step repeats
    lp_history = torch.zeros(b * k, 0, device=device)
    entropy_history = torch.zeros(b * k, 0, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    done = [False] * b
    offsets = torch.arange(b, device=device).unsqueeze(1) * k
    state = None
    for t in range(max_length):
        log_probs, state = model.step(memory, tokens, state)  # (B*K, V)
        vocab = log_probs.size(-1)
        entropies = _entropy(log_probs)
        log_probs = _never_emit(log_probs)
        candidates = (scores.reshape(-1, 1) + log_probs).reshape(b, k * vocab)
        n_cand = min(2 * k, k * vocab)
        top_scores, top_index = candidates.topk(n_cand, dim=1)
        beams, words = top_index // vocab, top_index % vocab
        rank = torch.arange(n_cand, device=device).expand(b, -1)
        is_eos = words == EOS_ID
        ends = is_eos & (rank < k) & torch.isfinite(top_scores)
        for row, col in ends.nonzero().tolist():
            if done[row]:
                continue
            src = row * k + int(beams[row, col])
            finished[row].append(
                _hypothesis(
                    tokens[src, 1:].tolist(),
                    [*lp_history[src].tolist(), float(log_probs[src, EOS_ID])],
                    [*entropy_history[src].tolist(), float(entropies[src])],
                    truncated=False,
                    length_penalty=length_penalty,
                )
            )
        # Continue with the K best candidates that do not end here (stable: by rank).
        keep = (is_eos.long() * n_cand + rank).argsort(dim=1)[:, :k]
        src = (offsets + beams.gather(1, keep)).reshape(-1)
        next_words = words.gather(1, keep).reshape(-1)
        tokens = torch.cat([tokens[src], next_words.unsqueeze(1)], dim=1)
        lp_history = torch.cat([lp_history[src], log_probs[src, next_words].unsqueeze(1)], dim=1)
        entropy_history = torch.cat([entropy_history[src], entropies[src].unsqueeze(1)], dim=1)
        scores = top_scores.gather(1, keep)
        state = {name: value.index_select(0, src) for name, value in state.items()}
        # A live beam's raw score only falls; with a length penalty, judge it at the length it
        # would have if it ended next step (the usual heuristic; exact for length_penalty 0).
        best_live = (scores.max(dim=1).values / float(t + 2) ** length_penalty).tolist()
        for row in range(b):
            if not done[row] and len(finished[row]) >= k:
                kth = sorted((h.score for h in finished[row]), reverse=True)[k - 1]
                done[row] = kth >= best_live[row]
        if all(done):
            break
    else:
        # max_length words without <eos>: keep the live beams, marked as cut short.
        for row in range(b):
            if done[row]:
                continue
            for j in range(k):
                src = row * k + j
                if torch.isfinite(scores[row, j]):
                    finished[row].append(
                        _hypothesis(
                            tokens[src, 1:].tolist(),
                            lp_history[src].tolist(),
                            entropy_history[src].tolist(),
                            truncated=True,
                            length_penalty=length_penalty,
                        )
                    )
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:k] for hyps in finished]
