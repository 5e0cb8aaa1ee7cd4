"""1NN retrieval baseline (Kim et al. 2019) and attribute-word retrieval for TopDown.

Each clip is mean-pooled over time; a query clip gets the caption of the training clip nearest
by L2 distance. The same neighbour's labels (as attribute word ids) are the "retrieved
attributes" that the realistic TopDown-AlignedAtt variant reads.

Decoding emits every word of the retrieved caption with probability c, how clearly the
nearest clip is the nearest: c = d2 / (d1 + d2) for the distances to the nearest (d1) and
the runner-up (d2), 1 for an exact match (or a bank of one clip), 0.5 when both are equally
near. So a suggestion's length-normalised score is log c and its per-token entropy
-c log c, instead of a constant certainty that ranked every clip alike.

The model has no trainable parameters: ``prepare`` (called by the trainer) fills a bank of
buffers, which the checkpoint stores like any state_dict, so a saved 1NN reloads strictly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from modeling.ml.config import NearestNeighbourConfig
from modeling.ml.data import CaptionItem
from modeling.ml.models.base import Batch, Captioner, Memory, State, masked_mean
from modeling.ml.vocab import EOS_ID, PAD_ID

# forward() gives log-probabilities with this floor instead of -inf so that a cross-entropy
# against it stays finite (validation loss of a retrieval model is still a number).
_LOG_FLOOR = -1e4
_BANK = ("bank_features", "bank_captions", "bank_attributes", "bank_attribute_lengths")


class NearestNeighbourCaptioner(Captioner):
    """Returns the nearest training clip's caption; ``step`` is one-hot on that caption."""

    config: NearestNeighbourConfig
    # the bank: buffers registered in __init__ and filled by prepare()
    bank_features: Tensor
    bank_captions: Tensor
    bank_attributes: Tensor
    bank_attribute_lengths: Tensor

    def __init__(self, config: NearestNeighbourConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("bank_features", torch.zeros(0, config.feature_dim))
        self.register_buffer("bank_captions", torch.zeros(0, 2, dtype=torch.long))
        self.register_buffer("bank_attributes", torch.zeros(0, 0, dtype=torch.long))
        self.register_buffer("bank_attribute_lengths", torch.zeros(0, dtype=torch.long))
        self.clip_ids: list[str] = []

    # ------------------------------------------------------------------ bank

    def prepare(self, train_items: Sequence[CaptionItem]) -> Sequence[CaptionItem]:
        """Fill the bank with one entry per training clip (its first caption, its attributes)."""
        first: dict[str, CaptionItem] = {}
        for index, item in enumerate(train_items):
            first.setdefault(item.clip_id or f"#{index}", item)
        if not first:
            raise ValueError("1NN retrieval needs at least one training clip")
        max_tokens, max_attrs = self.config.max_caption_length, self.config.max_attributes
        items = list(first.values())
        device = self.bank_features.device
        self.clip_ids = list(first)
        self.bank_features = torch.stack([item.features.float().mean(0) for item in items]).to(
            device
        )
        width = min(max(len(item.tokens) for item in items), max_tokens)
        captions = torch.full((len(items), width), PAD_ID, dtype=torch.long)
        attributes = torch.full((len(items), max_attrs), PAD_ID, dtype=torch.long)
        attribute_lengths = torch.zeros(len(items), dtype=torch.long)
        for row, item in enumerate(items):
            tokens = item.tokens[:width]
            tokens[-1] = EOS_ID  # a truncated caption still ends
            captions[row, : len(tokens)] = torch.tensor(tokens)
            attrs = item.attributes[:max_attrs]
            attributes[row, : len(attrs)] = torch.tensor(attrs, dtype=torch.long)
            attribute_lengths[row] = len(attrs)
        self.bank_captions = captions.to(device)
        self.bank_attributes = attributes.to(device)
        self.bank_attribute_lengths = attribute_lengths.to(device)
        return train_items

    def get_extra_state(self) -> Any:
        return {"clip_ids": list(self.clip_ids)}

    def set_extra_state(self, state: Any) -> None:
        self.clip_ids = list(state["clip_ids"])

    def _load_from_state_dict(
        self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any
    ) -> None:
        # The bank's size is data, not config: take the stored shapes before the strict copy.
        for name in _BANK:
            stored = state_dict.get(prefix + name)
            if stored is not None:
                setattr(self, name, torch.empty_like(stored, device=getattr(self, name).device))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # ------------------------------------------------------------------ retrieval

    def _distances(
        self, features: Tensor, lengths: Tensor, exclude: Sequence[str] | None = None
    ) -> Tensor:
        """(B, N) L2 distances between the queries' and the bank's time means."""
        if self.bank_features.size(0) == 0:
            raise RuntimeError("1NN bank is empty: call prepare(train_items) first")
        queries = masked_mean(features.float(), lengths)
        distances = torch.cdist(queries, self.bank_features)
        if exclude is not None:
            positions = {clip: row for row, clip in enumerate(self.clip_ids)}
            for b, clip in enumerate(exclude):
                row = positions.get(clip)
                if row is not None and self.bank_features.size(0) > 1:
                    distances[b, row] = float("inf")
        return distances

    def nearest(
        self, features: Tensor, lengths: Tensor, exclude: Sequence[str] | None = None
    ) -> Tensor:
        """Bank row of the nearest clip for each query (B,), by L2 between time means.

        ``exclude[b]`` names a clip id that query b may not retrieve (itself, when retrieving
        attributes for training clips; otherwise they would be its ground-truth labels).
        """
        return self._distances(features, lengths, exclude).argmin(dim=1)

    def nearest_with_confidence(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Bank row of each query's nearest clip (B,) and how clearly it is the nearest
        (B,) in [0.5, 1]: d2 / (d1 + d2) for the nearest and runner-up distances."""
        distances = self._distances(features, lengths)
        if distances.size(1) < 2:
            return distances.argmin(dim=1), torch.ones(distances.size(0), device=distances.device)
        two = distances.topk(2, dim=1, largest=False)
        d1, d2, rows = two.values[:, 0], two.values[:, 1], two.indices[:, 0]
        total = d1 + d2
        confidence = torch.where(total > 0, d2 / total.clamp(min=1e-12), torch.ones_like(d1))
        return rows, confidence

    def retrieve_attributes(
        self, features: Tensor, lengths: Tensor, exclude: Sequence[str] | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attribute word ids (B, A) and their counts (B,) of each query's nearest clip."""
        rows = self.nearest(features, lengths, exclude)
        return self.bank_attributes[rows], self.bank_attribute_lengths[rows]

    # ------------------------------------------------------------------ captioner interface

    def encode(self, batch: Batch) -> Memory:
        """-> {"caption": the retrieved "<bos> .. <eos>" ids (B, Lc), "confidence": how
        clearly each was the nearest (B,)}."""
        rows, confidence = self.nearest_with_confidence(batch["features"], batch["feature_lengths"])
        return {"caption": self.bank_captions[rows], "confidence": confidence}

    def _next_log_probs(
        self, caption: Tensor, position: int, floor: float, word_log_prob: Tensor
    ) -> Tensor:
        """(B, V): `word_log_prob` (B,) on the caption's next word, `floor` elsewhere."""
        if position < caption.size(1):
            target = caption[:, position]
            target = torch.where(target == PAD_ID, torch.full_like(target, EOS_ID), target)
        else:
            target = torch.full_like(caption[:, 0], EOS_ID)
        log_probs = caption.new_full(
            (caption.size(0), self.config.vocab_size), floor, dtype=torch.float
        )
        return log_probs.scatter(1, target.unsqueeze(1), word_log_prob.float().unsqueeze(1))

    def forward(self, batch: Batch) -> Tensor:
        # the training view: the retrieved caption is certain (a finite validation loss)
        caption = self.encode(batch)["caption"]
        certain = torch.zeros(caption.size(0), device=caption.device)
        steps = [
            self._next_log_probs(caption, i + 1, _LOG_FLOOR, certain)
            for i in range(batch["tokens"].size(1))
        ]
        return torch.stack(steps, dim=1)

    def step(self, memory: Memory, tokens: Tensor, state: State | None) -> tuple[Tensor, State]:
        word_log_prob = memory["confidence"].log()
        return (
            self._next_log_probs(memory["caption"], tokens.size(1), float("-inf"), word_log_prob),
            {},
        )


def with_retrieved_attributes(
    items: Sequence[CaptionItem], retriever: NearestNeighbourCaptioner, *, batch_size: int = 256
) -> list[CaptionItem]:
    """Copies of ``items`` whose attributes are their nearest *other* training clip's.

    This is the realistic TopDown-AlignedAtt setting: at test time the clip's own labels are
    unknown, so training on its own labels would teach the model to trust them too much.
    """
    out: list[CaptionItem] = []
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        feats = torch.nn.utils.rnn.pad_sequence(
            [i.features.float() for i in chunk], batch_first=True
        )
        lengths = torch.tensor([i.features.size(0) for i in chunk])
        attrs, counts = retriever.retrieve_attributes(feats, lengths, [i.clip_id for i in chunk])
        for item, row, count in zip(chunk, attrs.tolist(), counts.tolist(), strict=True):
            out.append(dataclasses.replace(item, attributes=row[:count]))
    return out
