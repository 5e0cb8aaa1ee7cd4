"""Nearest training clip by mean-pooled features: the 1NN retrieval that gives TopDown its
realistic attribute words (the labels of the nearest training clip, Kim et al. 2019)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch import Tensor


def mean_pooled(features: Sequence[Tensor]) -> np.ndarray:
    """(N, F) array of each clip's (T, F) features averaged over time."""
    return np.stack([f.float().mean(0).numpy() for f in features])


def nearest(
    bank: np.ndarray, queries: np.ndarray, *, exclude: Sequence[int | None] | None = None
) -> list[int]:
    """Index into `bank` (M, F) of the nearest row (L2) for each row of `queries` (N, F);
    `exclude[i]`, when not None, is a bank row query i may not pick (itself)."""
    distances = (
        (queries**2).sum(1, keepdims=True) - 2 * queries @ bank.T + (bank**2).sum(1)[None, :]
    )
    for row, banned in enumerate(exclude or []):
        if banned is not None:
            distances[row, banned] = np.inf
    return distances.argmin(1).tolist()
