"""YAMNet, Google's MobileNet v1 AudioSet classifier.

MobileNet v1 as the layer table in YAMNet's `yamnet.py` (TF "same" padding, BatchNorm eps
1e-4). Google publishes TensorFlow weights only and there is no canonical PyTorch state_dict:
converted weights must be renamed to this module's names (`layers.N.*`), with BatchNorm weights
set to 1 (YAMNet's BatchNorm has no scale); no converter is included, so treat this one as an
architecture, not a drop-in loader.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from modeling.ml.config_encoders import YAMNetConfig
from modeling.ml.encoders.framing import check_input, windows

# (kind, stride, filters) from yamnet.py's _YAMNET_LAYER_DEFS
YAMNET_LAYERS: tuple[tuple[str, int, int], ...] = (
    ("conv", 2, 32),
    ("sep", 1, 64),
    ("sep", 2, 128),
    ("sep", 1, 128),
    ("sep", 2, 256),
    ("sep", 1, 256),
    ("sep", 2, 512),
    ("sep", 1, 512),
    ("sep", 1, 512),
    ("sep", 1, 512),
    ("sep", 1, 512),
    ("sep", 1, 512),
    ("sep", 2, 1024),
    ("sep", 1, 1024),
)


class _SamePad(nn.Module):
    """TensorFlow's "same" padding for a 3x3 kernel: extra padding goes right/bottom."""

    def __init__(self, stride: int) -> None:
        super().__init__()
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        pads = []
        for size in (x.shape[3], x.shape[2]):
            rest = size % self.stride
            total = max(3 - self.stride, 0) if rest == 0 else max(3 - rest, 0)
            pads += [total // 2, total - total // 2]
        return F.pad(x, pads)


class _YamnetLayer(nn.Module):
    # a "conv" layer has neither (it has conv and bn); a separable layer has both
    depthwise: nn.Conv2d | None
    pointwise: nn.Conv2d | None

    def __init__(self, kind: str, stride: int, in_channels: int, filters: int) -> None:
        super().__init__()
        self.pad = _SamePad(stride)
        if kind == "conv":
            self.conv = nn.Conv2d(in_channels, filters, 3, stride=stride, bias=False)
            self.bn = nn.BatchNorm2d(filters, eps=1e-4)
            self.depthwise = self.pointwise = None
        else:
            self.depthwise = nn.Conv2d(
                in_channels, in_channels, 3, stride=stride, groups=in_channels, bias=False
            )
            self.depthwise_bn = nn.BatchNorm2d(in_channels, eps=1e-4)
            self.pointwise = nn.Conv2d(in_channels, filters, 1, bias=False)
            self.pointwise_bn = nn.BatchNorm2d(filters, eps=1e-4)

    def forward(self, x: Tensor) -> Tensor:
        x = self.pad(x)
        if self.depthwise is None or self.pointwise is None:
            return F.relu(self.bn(self.conv(x)))
        x = F.relu(self.depthwise_bn(self.depthwise(x)))
        return F.relu(self.pointwise_bn(self.pointwise(x)))


class YAMNet(nn.Module):
    """YAMNet (MobileNet v1 on 0.96 s log-mel patches, 50 % overlap): the 1024-d
    penultimate embedding per patch, as the light-weight BiLSTM captioner uses."""

    def __init__(self, config: YAMNetConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or YAMNetConfig()
        previous = 1
        layers = []
        for kind, stride, filters in YAMNET_LAYERS:
            width = max(1, int(filters * config.width))
            layers.append(_YamnetLayer(kind, stride, previous, width))
            previous = width
        self.layers = nn.ModuleList(layers)
        self.embedding_dim = previous
        self.logits = nn.Linear(previous, config.classes)

    @property
    def output_dim(self) -> int:
        return self.embedding_dim

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        cfg = self.config
        check_input(features, lengths, cfg.n_mels, "YAMNet")
        batch = features.shape[0]
        patches, counts, n = windows(features, lengths, cfg.patch_frames, cfg.patch_hop)
        x = patches[:, None]
        for layer in self.layers:
            x = layer(x)
        return x.mean(dim=(2, 3)).reshape(batch, n, -1), counts
