"""Modality-balanced pre-training weights (Shen et al. 2023, eq. 2-6).

Per iteration the captioner computes three losses on the same batch: ``L`` with both
modalities, ``L_a`` with the video embeddings zeroed and ``L_v`` with the audio embeddings
zeroed (eq. 2). A modality whose solo loss is far from the joint loss is one the model leans on
the other modality to cover, so it gets more weight::

    G_m      = (L_m - L)^2                              (eq. 3)
    w~_m     = softmax_m(alpha * G_m)                   (eq. 6)
    w_m     <- beta * w_m + (1 - beta) * w~_m           (eq. 5)
    L_pretrain = L + w_a * L_a + w_v * L_v              (eq. 4)

The weights are constants for back-propagation (computed from detached losses); they start
equal (1/2 each) and are buffers, so they are saved in checkpoints and a resumed run continues
the moving average. Here the weights are updated first and the updated ones weight this
iteration's losses.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

MODALITIES = ("audio", "video")


class ModalityBalancer(nn.Module):
    """Holds (w_a, w_v); ``forward(L, L_a, L_v)`` updates them and returns L_pretrain."""

    weights: Tensor

    def __init__(self, *, alpha: float = 10.0, beta: float = 0.99) -> None:
        super().__init__()
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"MBP beta must be in [0, 1], got {beta}")
        self.alpha = alpha
        self.beta = beta
        self.register_buffer("weights", torch.full((2,), 0.5))
        # Figures of the last update, for per-step logging (plain floats).
        self.last: dict[str, float] = {}

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}, beta={self.beta}"

    @torch.no_grad()
    def update(self, loss: Tensor, loss_audio: Tensor, loss_video: Tensor) -> Tensor:
        """Eq. 3, 6 and 5 on detached losses -> the new (w_a, w_v)."""
        joint = loss.detach().float()
        gaps = torch.stack([loss_audio.detach().float(), loss_video.detach().float()])
        gaps = (gaps - joint) ** 2  # eq. 3
        target = torch.softmax(self.alpha * gaps, dim=0)  # eq. 6
        self.weights.mul_(self.beta).add_((1.0 - self.beta) * target.to(self.weights))  # eq. 5
        self._record(joint, loss_audio, loss_video, gaps)
        return self.weights.clone()

    def _record(self, joint: Tensor, loss_audio: Tensor, loss_video: Tensor, gaps: Tensor) -> None:
        self.last = {
            "loss_joint": float(joint),
            "loss_audio": float(loss_audio),
            "loss_video": float(loss_video),
            "gap_audio": float(gaps[0]),
            "gap_video": float(gaps[1]),
            "weight_audio": float(self.weights[0]),
            "weight_video": float(self.weights[1]),
        }

    def forward(self, loss: Tensor, loss_audio: Tensor, loss_video: Tensor) -> Tensor:
        """Eq. 4 with freshly updated weights (updated only in training mode; in eval mode
        the figures are recorded with the weights as they are)."""
        if self.training:
            self.update(loss, loss_audio, loss_video)
        else:
            with torch.no_grad():
                losses = torch.stack([loss_audio.detach().float(), loss_video.detach().float()])
                gaps = (losses - loss.detach().float()) ** 2
                self._record(loss.detach(), loss_audio.detach(), loss_video.detach(), gaps)
        w_a, w_v = self.weights.to(loss.dtype)
        return loss + w_a * loss_audio + w_v * loss_video
