"""Batch-level augmentations of the pre-training stages: mixup and SpecAugment++.

Both act on a padded batch (see ``modeling.ml.models.base``) and mix each clip with another
clip of the same batch, ``partner = randperm(B)``; SpecAugment itself (masks within one clip)
is ``modeling.ml.features.SpecAugment``. They draw from torch's global generator, which the
trainer seeds and checkpoints, so a resumed run draws the same.

- ``mixup`` (Zhang et al. 2018, as PANNs train their taggers): with ``lam ~ Beta(alpha,
  alpha)`` per clip, ``x = lam x_i + (1 - lam) x_partner`` for the features and the soft
  keyword targets alike; a mixed clip lasts as long as the longer of the two.
- ``SpecAugmentPP`` (Wang et al. 2021, "SpecAugment++"): stripes of time frames and of
  frequency bins of each clip are replaced by the mean of the clip and its partner
  ("mixture") or by the partner's values ("cut"). The paper also masks hidden states; MAAC's
  code applies it to the input features of its keyword encoder, as here.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from modeling.ml.models.base import Batch

MIXED_KEYS = ("features", "keyword_targets")  # what mixup mixes; other entries stay the clip's


def mixup(batch: Batch, alpha: float) -> Batch:
    """The batch with every clip mixed with a partner clip (features, keyword targets)."""
    if alpha <= 0:
        raise ValueError(f"mixup alpha must be > 0, got {alpha}")
    if "keyword_targets" not in batch:
        raise ValueError("mixup mixes the targets too: the batch has no 'keyword_targets'")
    features = batch["features"]
    size = features.size(0)
    partner = torch.randperm(size, device=features.device)
    lam = torch.distributions.Beta(alpha, alpha).sample((size,)).to(features.device)
    mixed = dict(batch)
    for key in MIXED_KEYS:
        value = batch[key].float()
        weight = lam.view(-1, *([1] * (value.dim() - 1))).to(value.dtype)
        mixed[key] = weight * value + (1 - weight) * value[partner]
    lengths = batch["feature_lengths"]
    mixed["feature_lengths"] = torch.maximum(lengths, lengths[partner])
    return mixed


class SpecAugmentPP:
    """SpecAugment++ mixture masking or cutting on a padded batch of features (B, T, F)."""

    def __init__(
        self,
        *,
        mode: Literal["mixture", "cut"],
        time_mask: int,
        time_masks: int,
        freq_mask: int,
        freq_masks: int,
    ) -> None:
        if mode not in ("mixture", "cut"):
            raise ValueError(f"SpecAugment++ mode {mode!r} is not mixture or cut")
        if min(time_mask, time_masks, freq_mask, freq_masks) < 0:
            raise ValueError("SpecAugment++ widths and counts must be >= 0")
        self.mode = mode
        self.time_mask, self.time_masks = time_mask, time_masks
        self.freq_mask, self.freq_masks = freq_mask, freq_masks

    def stripes(self, lengths: Tensor, bins: int, frames: int) -> Tensor:
        """Boolean (B, T, F): True in each clip's stripes. Time stripes lie within the
        clip's own length; each stripe is 0..width wide, placed uniformly."""
        device = lengths.device
        size = lengths.size(0)
        time_axis = torch.arange(frames, device=device)
        freq_axis = torch.arange(bins, device=device)
        in_time = torch.zeros(size, frames, dtype=torch.bool, device=device)
        for _ in range(self.time_masks):
            limit = lengths.clamp(max=self.time_mask)
            width = (torch.rand(size, device=device) * (limit + 1)).long()
            start = (torch.rand(size, device=device) * (lengths - width + 1)).long()
            in_time |= (time_axis >= start[:, None]) & (time_axis < (start + width)[:, None])
        in_freq = torch.zeros(size, bins, dtype=torch.bool, device=device)
        for _ in range(self.freq_masks):
            width = (torch.rand(size, device=device) * (min(self.freq_mask, bins) + 1)).long()
            start = (torch.rand(size, device=device) * (bins - width + 1)).long()
            in_freq |= (freq_axis >= start[:, None]) & (freq_axis < (start + width)[:, None])
        valid = time_axis[None, :] < lengths[:, None]
        return (in_time[:, :, None] | in_freq[:, None, :]) & valid[:, :, None]

    def __call__(self, batch: Batch) -> Batch:
        features, lengths = batch["features"], batch["feature_lengths"].to(batch["features"].device)
        size, frames, bins = features.shape
        partner = torch.randperm(size, device=features.device)
        other = features[partner]
        fill = other if self.mode == "cut" else 0.5 * (features + other)
        stripes = self.stripes(lengths, bins, frames)
        return {**batch, "features": torch.where(stripes, fill, features)}
