"""PANNs CNN14 and ResNet38 (Kong et al. 2020), the AudioSet tagging networks.

Layer-for-layer from the PANNs source (qiuqiangkong/audioset_tagging_cnn), with the same
parameter names, so the published checkpoints (`{"model": state_dict}`) load; their
torchlibrosa front-end weights (`spectrogram_extractor.*`, `logmel_extractor.*`) are dropped
because features come from `features.PANNS`, which approximates torchlibrosa's log-mel (Slaney
mels, dB).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from modeling.ml.config_encoders import PannsConfig
from modeling.ml.encoders.framing import check_input


class _ConvBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)

    def forward(self, x: Tensor, pool_size: tuple[int, int] = (2, 2)) -> Tensor:
        x = F.relu_(self.bn1(self.conv1(x)))
        x = F.relu_(self.bn2(self.conv2(x)))
        return F.avg_pool2d(x, kernel_size=pool_size)


class _PannsBase(nn.Module):
    """Shared head: frequency mean, PANNs' max+avg smoothing over time, fc1 + ReLU per
    frame. Output (B, T/32, 2048); `fc_audioset` is loaded but unused."""

    config: PannsConfig
    # set by each subclass's __init__
    bn0: nn.BatchNorm2d
    fc1: nn.Linear
    reduction = 32

    @property
    def output_dim(self) -> int:
        return self.config.embedding_dim

    def _head(self, x: Tensor) -> Tensor:
        x = x.mean(dim=3)  # (B, C, T')
        x = F.max_pool1d(x, 3, 1, 1) + F.avg_pool1d(x, 3, 1, 1)
        x = F.dropout(x, 0.5, self.training)
        return F.relu_(self.fc1(x.transpose(1, 2)))

    def _prepare(self, features: Tensor, lengths: Tensor, name: str) -> Tensor:
        check_input(features, lengths, self.config.n_mels, name)
        if features.shape[1] < self.reduction:
            raise ValueError(f"{name}: needs at least {self.reduction} frames")
        x = features[:, None]  # (B, 1, T, F)
        return self.bn0(x.transpose(1, 3)).transpose(1, 3)

    def _lengths(self, lengths: Tensor, frames: int) -> Tensor:
        return (lengths // self.reduction).clamp(min=1, max=frames)


class Cnn14(_PannsBase):
    """PANNs CNN14 (Kong et al., 2020): six conv blocks, 80.8 M parameters at full size."""

    def __init__(self, config: PannsConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or PannsConfig()
        self.bn0 = nn.BatchNorm2d(config.n_mels)
        widths = (1, *config.widths)
        for i in range(len(config.widths)):
            setattr(self, f"conv_block{i + 1}", _ConvBlock(widths[i], widths[i + 1]))
        self.n_blocks = len(config.widths)
        self.fc1 = nn.Linear(config.widths[-1], config.embedding_dim)
        self.fc_audioset = nn.Linear(config.embedding_dim, config.classes)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        x = self._prepare(features, lengths, "Cnn14")
        for i in range(1, self.n_blocks + 1):
            block = getattr(self, f"conv_block{i}")
            x = block(x, pool_size=(2, 2) if i < self.n_blocks else (1, 1))
            x = F.dropout(x, 0.2, self.training)
        out = self._head(x)
        return out, self._lengths(lengths, out.shape[1])


class _BasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int, downsample: nn.Module | None):
        super().__init__()
        self.stride = stride
        self.conv1 = nn.Conv2d(inplanes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        out = F.avg_pool2d(x, 2) if self.stride == 2 else x
        out = F.relu_(self.bn1(self.conv1(out)))
        out = F.dropout(out, 0.1, self.training)
        out = self.bn2(self.conv2(out))
        identity = self.downsample(x) if self.downsample is not None else x
        return F.relu_(out + identity)


class _ResNet(nn.Module):
    def __init__(self, layers: tuple[int, ...], widths: tuple[int, ...]) -> None:
        super().__init__()
        inplanes = widths[0]
        for i, (blocks, planes) in enumerate(zip(layers, widths, strict=True)):
            stride = 1 if i == 0 else 2
            downsample: nn.Module | None = None
            if stride == 2:
                downsample = nn.Sequential(
                    nn.AvgPool2d(2),
                    nn.Conv2d(inplanes, planes, 1, bias=False),
                    nn.BatchNorm2d(planes),
                )
            elif inplanes != planes:
                downsample = nn.Sequential(
                    nn.Conv2d(inplanes, planes, 1, bias=False), nn.BatchNorm2d(planes)
                )
            stage = [_BasicBlock(inplanes, planes, stride, downsample)]
            stage += [_BasicBlock(planes, planes, 1, None) for _ in range(1, blocks)]
            setattr(self, f"layer{i + 1}", nn.Sequential(*stage))
            inplanes = planes
        self.n_layers = len(layers)

    def forward(self, x: Tensor) -> list[Tensor]:
        outputs = []
        for i in range(1, self.n_layers + 1):
            x = getattr(self, f"layer{i}")(x)
            outputs.append(x)
        return outputs


class ResNet38(_PannsBase):
    """PANNs ResNet38: a conv block, a 3-4-6-3 ResNet, a 2048-wide conv block (73.7 M
    parameters at full size). Counted as MAAC counts them, its six blocks are
    ``conv_block1``, ``resnet.layer1`` .. ``resnet.layer4`` and ``conv_block_after1``;
    `forward_blocks` gives the frame-level outputs after the 3rd, 4th and last of them
    (layer2, layer3 and conv_block_after1: 128, 256 and 2048 channels at full size), which
    MAAC's keyword encoder pools and concatenates."""

    def __init__(self, config: PannsConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or PannsConfig()
        widths = config.widths
        self.bn0 = nn.BatchNorm2d(config.n_mels)
        self.conv_block1 = _ConvBlock(1, widths[0])
        self.resnet = _ResNet(config.resnet_layers, widths[: len(config.resnet_layers)])
        self.conv_block_after1 = _ConvBlock(widths[len(config.resnet_layers) - 1], widths[-1])
        self.fc1 = nn.Linear(widths[-1], config.embedding_dim)
        self.fc_audioset = nn.Linear(config.embedding_dim, config.classes)

    def _trunk(self, features: Tensor, lengths: Tensor) -> tuple[list[Tensor], Tensor]:
        x = self._prepare(features, lengths, "ResNet38")
        x = F.dropout(self.conv_block1(x, pool_size=(2, 2)), 0.2, self.training)
        stages = self.resnet(x)
        x = F.dropout(F.avg_pool2d(stages[-1], 2), 0.2, self.training)
        x = F.dropout(self.conv_block_after1(x, pool_size=(1, 1)), 0.2, self.training)
        return stages, x

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        _, x = self._trunk(features, lengths)
        out = self._head(x)
        return out, self._lengths(lengths, out.shape[1])

    @property
    def level_dims(self) -> tuple[int, int, int]:
        """Channels of the three `forward_blocks` levels: layer2, layer3, the last block."""
        widths = self.config.widths
        return widths[1], widths[2], widths[-1]

    def forward_blocks(self, features: Tensor, lengths: Tensor) -> list[tuple[Tensor, Tensor]]:
        """[(B, T_k, C_k), lengths_k] after the 3rd, 4th and last of the six blocks
        (``resnet.layer2``, ``resnet.layer3``, ``conv_block_after1``), each averaged over
        frequency."""
        stages, last = self._trunk(features, lengths)
        out = []
        for x in (stages[1], stages[2], last):
            reduction = features.shape[1] // x.shape[2]
            steps = x.mean(dim=3).transpose(1, 2)
            out.append((steps, (lengths // reduction).clamp(min=1, max=steps.shape[1])))
        return out
