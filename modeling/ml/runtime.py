"""Where a model runs and how reproducibly: the device, batches moved onto it, the seeds."""

from __future__ import annotations

import random

import torch

from modeling.ml.models.base import Batch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy (when installed) and torch, CPU and CUDA."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:  # numpy is optional for this package
        pass
    else:
        np.random.seed(seed % 2**32)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"train.device={name!r} but CUDA is not available on this machine")
    return device


def to_device(batch: Batch, device: torch.device) -> Batch:
    # non_blocking pairs with pin_memory: the copy overlaps with the previous step's compute.
    return {key: value.to(device, non_blocking=True) for key, value in batch.items()}
