"""Input checks and framing shared by the audio encoders: (B, T, F) features and (B,)
lengths in, windows and padding masks out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def check_input(features: Tensor, lengths: Tensor, n_mels: int, name: str) -> None:
    if features.dim() != 3:
        raise ValueError(f"{name}: features must be (B, T, F), got shape {tuple(features.shape)}")
    if features.shape[2] != n_mels:
        raise ValueError(f"{name}: expects {n_mels} feature bins, got {features.shape[2]}")
    if lengths.shape != (features.shape[0],):
        raise ValueError(f"{name}: lengths must be (B,), got {tuple(lengths.shape)}")


def windows(features: Tensor, lengths: Tensor, window: int, hop: int) -> tuple[Tensor, Tensor, int]:
    """(B, T, F) -> patches (B * N, window, F), per-clip patch counts (B,), N.

    Like VGGish's framing, only whole windows are kept; a clip shorter than one window is
    padded (with its last frame's padding) to one window."""
    batch, frames, bins = features.shape
    if frames < window:
        features = F.pad(features, (0, 0, 0, window - frames))
        frames = window
    n = 1 + (frames - window) // hop
    patches = features.unfold(1, window, hop)  # (B, N, F, window)
    patches = patches.permute(0, 1, 3, 2).reshape(batch * n, window, bins)
    counts = (1 + (lengths - window).clamp(min=0) // hop).clamp(max=n)
    return patches, counts, n


def padding_mask(lengths: Tensor, frames: int) -> Tensor:
    return torch.arange(frames, device=lengths.device)[None, :] < lengths[:, None]
