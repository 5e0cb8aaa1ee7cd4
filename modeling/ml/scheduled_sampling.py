"""Scheduled sampling (Bengio et al., NeurIPS 2015) for any teacher-forced captioner.

In a cross-entropy stage each input word after ``<bos>`` is, with probability p, replaced by
the model's own prediction of that word, so the model learns to continue from its own
mistakes. The predictions come from a first teacher-forced pass without gradients, and the
loss is then taken on a second pass over the mixed inputs against the true next words (the
two-pass form of Mihaylova & Martins, ACL SRW 2019): it needs nothing of a model but its
``forward(batch) -> logits``, so recurrent and parallel decoders alike get it.

MAAC's released code (WangHelin1997/DCASE2021_Task6_PKU, model.py AttDecoder.trainer) samples
inside its recurrent loop, one draw per time step for the whole batch, with teacher-forcing
ratio ``1 - 0.3 * epoch / max_epoch`` (epochs counted from 1). Here the draw is per word (the
same expected rate) and the predictions are those of the teacher-forced prefix.
"""

from __future__ import annotations

import torch
from torch import Tensor

from modeling.ml.models.base import Batch, Captioner
from modeling.ml.vocab import BOS_ID, PAD_ID, UNK_ID


def sampling_probability(final: float, epoch_in_stage: int, stage_epochs: int) -> float:
    """p in epoch ``epoch_in_stage`` (0-based) of a stage of ``stage_epochs``: rises linearly
    to ``final`` at the stage's last epoch, ``final * (i + 1) / E``."""
    if final <= 0.0 or stage_epochs < 1:
        return 0.0
    return final * min(epoch_in_stage + 1, stage_epochs) / stage_epochs


def mixed_tokens(tokens: Tensor, logits: Tensor, p: float) -> Tensor:
    """``tokens`` (B, L) with each word at positions 1.. (never <bos>, never <pad>) replaced
    with probability ``p`` by the prediction at the position before it, the argmax of
    ``logits`` (B, L, V) over the words a caption may hold (not <pad>, <bos>, <unk>).
    ``p`` 0 returns ``tokens`` itself."""
    if p <= 0.0:
        return tokens
    scores = logits[:, :-1].detach().float().clone()
    scores[..., [PAD_ID, BOS_ID, UNK_ID]] = float("-inf")
    predicted = scores.argmax(dim=-1)  # (B, L-1): position i's guess of word i + 1
    rest = tokens[:, 1:]
    draw = torch.rand(rest.shape, device=tokens.device) < p
    replace = draw & (rest != PAD_ID)
    return torch.cat([tokens[:, :1], torch.where(replace, predicted, rest)], dim=1)


def scheduled_batch(model: Captioner, batch: Batch, p: float) -> Batch:
    """``batch`` with its input words mixed with ``model``'s own predictions at rate ``p``
    (the targets stay ``batch["tokens"]``; only the model's input changes)."""
    if p <= 0.0:
        return batch
    with torch.no_grad():
        logits = model(batch)
    return {**batch, "tokens": mixed_tokens(batch["tokens"], logits, p)}
