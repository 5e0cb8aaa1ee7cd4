"""The interface every captioner implements, and the masking helpers they share.

Dimension legend used in docstrings across ``modeling.ml``::

    B - clips in the batch          T - feature frames (padded)     F - feature size
    L - caption tokens (padded)     V - vocabulary size             N - attribute words (padded)

A batch is a dict (see ``modeling.ml.data.collate``):

    "features"          (B, T, F) float, zero beyond each clip's length
    "feature_lengths"   (B,) long, >= 1
    "tokens"            (B, L) long, "<bos> w1 .. wn <eos> <pad>..."
    "attributes"        (B, N) long attribute word ids, N = 0 when no clip has any (TopDown)
    "attribute_lengths" (B,) long, may be 0
    "mid_features"      (B, T_mid, F_mid) float (optional, TopDown with two feature levels)
    "mid_feature_lengths" (B,) long (optional; the mid level's own frame counts, else
                        "feature_lengths")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from modeling.ml.vocab import PAD_ID

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from modeling.ml.config import CaptionerConfig
    from modeling.ml.vocab import Vocabulary

Batch = dict[str, Tensor]
# What encode() returns and step() reads: batch-first tensors, so that beam search can repeat
# every entry per hypothesis with repeat_interleave(dim=0) without knowing the model.
Memory = dict[str, Tensor]
# Decoder state between steps: batch-first tensors too, reordered with index_select(0, ...).
State = dict[str, Tensor]


class Captioner(nn.Module):
    """Base class: teacher-forced ``forward`` for training, ``encode``/``step`` for decoding.

    Position i of ``forward``'s logits predicts token i + 1 (the usual shift), so the loss
    compares ``logits[:, :-1]`` with ``tokens[:, 1:]`` (see ``caption_loss``).
    """

    config: CaptionerConfig
    # Whether the model reads batch["video"] / "video_lengths" (the data glue attaches video
    # features only then).
    uses_video: ClassVar[bool] = False

    def forward(self, batch: Batch) -> Tensor:
        """Teacher-forced next-word logits (B, L, V) for batch["tokens"] (B, L)."""
        raise NotImplementedError

    def encode(self, batch: Batch) -> Memory:
        """Everything the decoder needs from the audio, computed once per clip."""
        raise NotImplementedError

    def step(self, memory: Memory, tokens: Tensor, state: State | None) -> tuple[Tensor, State]:
        """Log-probabilities (B, V) of the next word after the prefix ``tokens`` (B, t).

        ``tokens`` always holds the whole prefix starting with <bos>; recurrent models read only
        its last column and carry the rest in ``state`` (None on the first step).
        """
        raise NotImplementedError

    def prepare(self, train_items: Sequence[Any]) -> Sequence[Any]:
        """Hook run by the trainer before training; returns the items to train on.

        1NN fills its retrieval bank here.
        """
        return train_items

    @property
    def max_prefix_length(self) -> int | None:
        """Longest token prefix ``step`` accepts (None: unbounded); decoding stops before it."""
        return None

    @property
    def trainable(self) -> bool:
        return any(p.requires_grad for p in self.parameters())

    def load_word_vectors(self, path: str | Path, vocab: Vocabulary) -> int:
        """Starts the word embeddings from a word-vector file (``config.word_vectors_file()``);
        returns how many vocabulary words it had. Only models with such a setting do."""
        raise ValueError(f"{type(self).__name__} takes no word vectors")


def caption_loss(logits: Tensor, tokens: Tensor, *, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy of next-word logits (B, L, V) against tokens (B, L), <pad> ignored."""
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.size(-1)),
        tokens[:, 1:].reshape(-1),
        ignore_index=PAD_ID,
        label_smoothing=label_smoothing,
    )


def lengths_to_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """(B,) lengths -> (B, max_len) bool mask, True on real positions."""
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def masked_softmax(scores: Tensor, mask: Tensor, dim: int = -1) -> Tensor:
    """Softmax over ``dim`` ignoring positions where ``mask`` is False.

    A row with no real position gets all-zero weights instead of NaN (a clip without attribute
    words must not poison the batch).
    """
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=dim)
    return weights.nan_to_num(0.0)


def masked_mean(x: Tensor, lengths: Tensor) -> Tensor:
    """Mean of (B, T, F) over the first lengths[b] frames -> (B, F)."""
    mask = lengths_to_mask(lengths, x.size(1)).unsqueeze(-1).to(x.dtype)
    return (x * mask).sum(1) / lengths.clamp(min=1).unsqueeze(-1).to(x.dtype)


def xavier_init(module: nn.Module) -> None:
    """Xavier-uniform weight matrices, zero biases (Kim et al. train with Xavier init).

    Embeddings keep their N(0, 1) init apart from the zero <pad> row.
    """
    for name, param in module.named_parameters():
        if "embedding" in name:
            continue
        if param.dim() >= 2:
            nn.init.xavier_uniform_(param)
        elif name.rsplit(".", 1)[-1].startswith("bias"):
            nn.init.zeros_(param)
