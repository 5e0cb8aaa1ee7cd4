"""Self-critical sequence training (Rennie et al. 2017), MAAC's second training stage.

For each clip a caption w^s is sampled from the model and a greedy caption w^g is decoded
without gradients as the baseline; with a reward r (CIDEr-D against the clip's references in
MAAC) the policy-gradient loss is::

    loss = - sum_i (r(w^s_i) - r(w^g_i)) * sum_t log p(w^s_i,t)  /  (number of sampled tokens)

Samples better than what the model would say greedily become more likely, worse ones less, and
the greedy baseline needs no learned critic. Tokens count up to and including <eos>; <pad>,
<bos> and <unk> are never sampled (as in ``modeling.ml.decoding``).

The reward is the caller's: ``reward_fn(candidates, rows)`` gets word-id lists (without
<bos>/<eos>) and, for each, the batch row it belongs to, and returns one reward per candidate.
The trainer maps the rows to clip ids and calls a ``ClipRewardFn``; ``cider_reward`` builds
the one the app uses (CIDEr-D against each clip's training references) from the references.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from modeling.ml.cider import CiderD
from modeling.ml.models.base import Batch, Captioner
from modeling.ml.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocabulary, tokenize

RewardFn = Callable[[list[list[int]], list[int]], Sequence[float] | Tensor]
# reward_fn(captions as word-id lists without <bos>/<eos>, the clip id of each) -> rewards.
ClipRewardFn = Callable[[list[list[int]], list[str]], Sequence[float]]


@dataclass
class Sampled:
    """Captions decoded for a batch, with what the loss needs."""

    words: list[list[int]]  # per caption, word ids without <bos>/<eos>
    rows: list[int]  # batch row of each caption
    log_probs: Tensor  # (N, S) log-probability of each emitted token (0 after the end)
    mask: Tensor  # (N, S) True on emitted tokens, <eos> included


@dataclass
class SCSTOutput:
    loss: Tensor  # scalar, differentiable
    sample_reward: float  # mean reward of the sampled captions
    baseline_reward: float  # mean reward of the greedy captions
    advantages: Tensor  # (N,) r(w^s) - r(w^g), detached
    samples: Sampled


def decode_with_grad(
    model: Captioner,
    batch: Batch,
    *,
    max_length: int = 30,
    sample: bool = True,
    n_per_clip: int = 1,
    temperature: float = 1.0,
) -> Sampled:
    """Sample (or take the argmax of) ``n_per_clip`` captions per clip, keeping the graph.

    <eos> is forced after ``max_length`` words (and before the model's longest prefix).
    """
    if max_length < 1:
        raise ValueError(f"max_length must be at least 1, got {max_length}")
    if n_per_clip < 1:
        raise ValueError(f"n_per_clip must be at least 1, got {n_per_clip}")
    limit = model.max_prefix_length
    if limit is not None:
        max_length = min(max_length, limit - 1)
    b = batch["features"].size(0)
    memory = {
        name: value.repeat_interleave(n_per_clip, dim=0)
        for name, value in model.encode(batch).items()
    }
    n = b * n_per_clip
    device = batch["features"].device
    tokens = torch.full((n, 1), BOS_ID, dtype=torch.long, device=device)
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    chosen_log_probs, emitted = [], []
    state = None
    for t in range(max_length + 1):
        log_probs, state = model.step(memory, tokens, state)
        log_probs = log_probs.clone()
        log_probs[:, [PAD_ID, BOS_ID, UNK_ID]] = float("-inf")
        if t == max_length:
            next_words = torch.full((n,), EOS_ID, dtype=torch.long, device=device)
        elif sample:
            scaled = torch.log_softmax(log_probs.detach() / temperature, dim=-1)
            next_words = torch.multinomial(scaled.exp(), 1).squeeze(1)
        else:
            next_words = log_probs.detach().argmax(dim=-1)
        next_words = next_words.masked_fill(finished, PAD_ID)
        step_log_prob = log_probs.gather(1, next_words.unsqueeze(1)).squeeze(1)
        chosen_log_probs.append(step_log_prob.masked_fill(finished, 0.0))
        emitted.append(~finished)
        tokens = torch.cat([tokens, next_words.unsqueeze(1)], dim=1)
        finished = finished | (next_words == EOS_ID)
        if bool(finished.all()):
            break
    words = []
    for row in tokens[:, 1:].tolist():
        words.append(row[: row.index(EOS_ID)])
    return Sampled(
        words=words,
        rows=[i // n_per_clip for i in range(n)],
        log_probs=torch.stack(chosen_log_probs, dim=1),
        mask=torch.stack(emitted, dim=1),
    )


def _rewards(reward_fn: RewardFn, sampled: Sampled, device: torch.device) -> Tensor:
    rewards = torch.as_tensor(reward_fn(sampled.words, sampled.rows), dtype=torch.float32)
    if rewards.shape != (len(sampled.words),):
        raise ValueError(
            f"reward_fn returned {tuple(rewards.shape)} rewards for {len(sampled.words)} captions"
        )
    return rewards.to(device)


def scst_loss(
    model: Captioner,
    batch: Batch,
    reward_fn: RewardFn,
    *,
    max_length: int = 30,
    n_samples: int = 1,
) -> SCSTOutput:
    """The self-critical loss for one batch: sampled captions against the greedy baseline.

    The greedy baseline is decoded in eval mode without gradients (the model's mode is
    restored after), the samples in the model's current mode with gradients.
    """
    was_training = model.training
    model.eval()
    with torch.no_grad():
        baseline = decode_with_grad(model, batch, max_length=max_length, sample=False)
    model.train(was_training)
    samples = decode_with_grad(
        model, batch, max_length=max_length, sample=True, n_per_clip=n_samples
    )
    device = samples.log_probs.device
    baseline_rewards = _rewards(reward_fn, baseline, device)
    sample_rewards = _rewards(reward_fn, samples, device)
    advantages = sample_rewards - baseline_rewards.repeat_interleave(n_samples)
    weighted = advantages[:, None] * samples.log_probs * samples.mask
    loss = -weighted.sum() / samples.mask.sum().clamp(min=1)
    return SCSTOutput(
        loss=loss,
        sample_reward=float(sample_rewards.mean()),
        baseline_reward=float(baseline_rewards.mean()),
        advantages=advantages.detach(),
        samples=samples,
    )


def cider_reward(references: Mapping[str, Sequence[str]], vocab: Vocabulary) -> ClipRewardFn:
    """The self-critical reward: CIDEr-D of each sampled caption against its clip's
    ``references`` (texts by clip id), with document frequencies over all of them
    (``modeling.ml.cider``: pycocoevalcap's formula on the vocabulary's lower-cased,
    punctuation-free words)."""
    scorer = CiderD(
        {clip_id: [tokenize(t) for t in texts] for clip_id, texts in references.items()}
    )

    def reward(captions: list[list[int]], clip_ids: list[str]) -> list[float]:
        return scorer.scores([vocab.decode(words).split() for words in captions], clip_ids)

    return reward
