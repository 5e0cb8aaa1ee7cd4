"""ConvEncoder: our own small CNN, trained from scratch with the captioner; exactly
padding-invariant. It stands in for any pretrained encoder that has no weights file.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from modeling.ml.config_encoders import ConvEncoderConfig
from modeling.ml.encoders.framing import check_input, padding_mask


class ConvEncoder(nn.Module):
    """Small CNN on log-mel, trained from scratch: conv-BN-ReLU blocks pooling frequency
    (and time in the first `time_pools` blocks), frequency mean, linear to `d_model`.
    Padded frames are zeroed before every convolution, so each clip's output is the same
    whatever it is batched with (in eval mode)."""

    def __init__(self, config: ConvEncoderConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or ConvEncoderConfig()
        blocks = []
        previous = 1
        for width in config.channels:
            blocks.append(
                nn.Sequential(
                    nn.Conv2d(previous, width, 3, padding=1, bias=False),
                    nn.BatchNorm2d(width),
                    nn.ReLU(inplace=True),
                )
            )
            previous = width
        self.blocks = nn.ModuleList(blocks)
        self.dropout = nn.Dropout(config.dropout)
        self.proj = nn.Linear(previous, config.d_model)

    @property
    def output_dim(self) -> int:
        return self.config.d_model

    @property
    def reduction(self) -> int:
        return 2**self.config.time_pools

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        check_input(features, lengths, self.config.n_mels, "ConvEncoder")
        if int(lengths.min()) < self.reduction:
            raise ValueError(f"ConvEncoder: every clip needs at least {self.reduction} frames")
        x = features[:, None]  # (B, 1, T, F)
        for i, block in enumerate(self.blocks):
            x = x * padding_mask(lengths, x.shape[2])[:, None, :, None]
            x = block(x)
            time_pool = 2 if i < self.config.time_pools else 1
            freq_pool = 2 if x.shape[3] >= 2 else 1
            x = F.max_pool2d(x, (time_pool, freq_pool))
            lengths = lengths // time_pool
        x = x.mean(dim=3).transpose(1, 2)  # (B, T', C)
        x = self.proj(self.dropout(x))
        return x * padding_mask(lengths, x.shape[1])[:, :, None], lengths
