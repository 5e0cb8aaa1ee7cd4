"""Audio encoders with one interface: `forward(features (B, T, F), lengths (B,)) ->
(embeddings (B, T', D), lengths' (B,))`.

Pretrained encoders load a state_dict from a file named in the config (`EncoderConfig.weights`);
nothing is downloaded. Without a weights file, `build_encoder` returns the trainable small CNN
(`ConvEncoder`) with the same interface and output size, so every captioner runs offline.

What is reproduced and how faithfully:

- **VGGish** (`VGGish`): layer-for-layer the network of torchvggish (harritaylor/torchvggish),
  whose converted state_dict (`features.N.*`, `embeddings.N.*`) loads as is; PCA
  post-processing is not applied. Input: non-overlapping 96-frame x 64-band patches of the
  `features.VGGISH` front end, which follows VGGish's (magnitude STFT, HTK mels, log + 0.01)
  with torchaudio's filterbank rather than VGGish's own NumPy code.
- **PANNs CNN14 and ResNet38** (`Cnn14`, `ResNet38`): layer-for-layer from the PANNs source
  (qiuqiangkong/audioset_tagging_cnn), with the same parameter names, so the published
  checkpoints (`{"model": state_dict}`) load; their torchlibrosa front-end weights
  (`spectrogram_extractor.*`, `logmel_extractor.*`) are dropped because features come from
  `features.PANNS`, which approximates torchlibrosa's log-mel (Slaney mels, dB).
- **AST** (`AST`): the distilled-DeiT ViT of the AST paper, with the parameter names of
  timm 0.4.5's `vit_deit_base_distilled` under `v.` (including DeiT's unused ImageNet heads)
  plus `mlp_head`, which is what AST's code saves; the DataParallel `module.` prefix is
  stripped. Written from the paper and timm's layout and not checked against a downloaded
  checkpoint here: the strict load reports any difference by name. Input is Kaldi fbank
  (`features.AST`) normalised with AST's AudioSet mean/std. Positional embeddings are sized
  for `max_frames`; a checkpoint trained with another length will not load (no
  interpolation).
- **YAMNet** (`YAMNet`): MobileNet v1 as the layer table in YAMNet's `yamnet.py` (TF "same"
  padding, BatchNorm eps 1e-4). Google publishes TensorFlow weights only and there is no
  canonical PyTorch state_dict: converted weights must be renamed to this module's names
  (`layers.N.*`), with BatchNorm weights set to 1 (YAMNet's BatchNorm has no scale); no
  converter is included, so treat this one as an architecture, not a drop-in loader.
- PANNs CNN14 and VGGish were checked by parameter count (80,753,615 and 72,141,184, the
  published figures); ResNet38 here has 73,783,247.
- **ConvEncoder**: our own small CNN, trained from scratch; exactly padding-invariant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# helpers -----------------------------------------------------------------------------------


def _check_input(features: Tensor, lengths: Tensor, n_mels: int, name: str) -> None:
    if features.dim() != 3:
        raise ValueError(f"{name}: features must be (B, T, F), got shape {tuple(features.shape)}")
    if features.shape[2] != n_mels:
        raise ValueError(f"{name}: expects {n_mels} feature bins, got {features.shape[2]}")
    if lengths.shape != (features.shape[0],):
        raise ValueError(f"{name}: lengths must be (B,), got {tuple(lengths.shape)}")


def _windows(
    features: Tensor, lengths: Tensor, window: int, hop: int
) -> tuple[Tensor, Tensor, int]:
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


def _padding_mask(lengths: Tensor, frames: int) -> Tensor:
    return torch.arange(frames, device=lengths.device)[None, :] < lengths[:, None]


# VGGish ------------------------------------------------------------------------------------


@dataclass
class VGGishConfig:
    n_mels: int = 64  # input bands (VGGish: 64)
    patch_frames: int = 96  # frames per example (0.96 s at 100 frames/s)
    channels: tuple[int, ...] = (64, 128, 256, 256, 512, 512)  # conv widths (VGGish)
    hidden: int = 4096  # fc1/fc2 width
    embedding_dim: int = 128  # final embedding
    output: str = "embedding"  # embedding (128) | fc2 (4096) | conv4 (512 per 0.16 s step)


class VGGish(nn.Module):
    """VGGish (Hershey et al., 2017), torchvggish parameter names. Output per 0.96 s patch:
    the 128-d embedding, the 4096-d fc2 activations (AudioCaps' "high level"), or the conv4
    map averaged over frequency: 6 steps of 512-d per patch (AudioCaps' "mid level")."""

    def __init__(self, config: VGGishConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or VGGishConfig()
        if config.output not in ("embedding", "fc2", "conv4"):
            raise ValueError(f"VGGish output {config.output!r}: use embedding, fc2 or conv4")
        c = config.channels
        layers: list[nn.Module] = []
        previous = 1
        # VGG "A" layout: conv, pool, conv, pool, conv conv, pool, conv conv, pool
        for i, width in enumerate(c):
            layers += [nn.Conv2d(previous, width, 3, padding=1), nn.ReLU(inplace=True)]
            if i in (0, 1, 3, 5):
                layers.append(nn.MaxPool2d(2, 2))
            previous = width
        self.features = nn.Sequential(*layers)
        t, f = config.patch_frames // 16, config.n_mels // 16
        self.embeddings = nn.Sequential(
            nn.Linear(c[-1] * t * f, config.hidden),
            nn.ReLU(inplace=True),
            nn.Linear(config.hidden, config.hidden),
            nn.ReLU(inplace=True),
            nn.Linear(config.hidden, config.embedding_dim),
            nn.ReLU(inplace=True),
        )

    @property
    def output_dim(self) -> int:
        return _vggish_dim(self.config)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        cfg = self.config
        _check_input(features, lengths, cfg.n_mels, "VGGish")
        batch = features.shape[0]
        patches, counts, n = _windows(features, lengths, cfg.patch_frames, cfg.patch_frames)
        x = self.features(patches[:, None])  # (B*N, C, T/16, F/16)
        if cfg.output == "conv4":
            steps = x.shape[2]
            x = x.mean(dim=3).transpose(1, 2).reshape(batch, n * steps, -1)
            return x, counts * steps
        x = x.permute(0, 2, 3, 1).flatten(1)  # TF's NHWC flatten order, as torchvggish
        x = self.embeddings[:4](x) if cfg.output == "fc2" else self.embeddings(x)
        return x.reshape(batch, n, -1), counts


# PANNs -------------------------------------------------------------------------------------


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


@dataclass
class PannsConfig:
    n_mels: int = 64  # input bands (PANNs: 64)
    widths: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048)  # CNN14 conv blocks
    resnet_layers: tuple[int, ...] = (3, 4, 6, 3)  # ResNet38 basic blocks per stage
    embedding_dim: int = 2048  # fc1 width (and CNN14's last block)
    classes: int = 527  # AudioSet head, kept so published checkpoints load strictly


class _PannsBase(nn.Module):
    """Shared head: frequency mean, PANNs' max+avg smoothing over time, fc1 + ReLU per
    frame. Output (B, T/32, 2048); `fc_audioset` is loaded but unused."""

    config: PannsConfig
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
        _check_input(features, lengths, self.config.n_mels, name)
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
    parameters at full size). `forward_blocks` gives the frame-level outputs after the 3rd,
    4th and last blocks, which MAAC's keyword encoder pools and concatenates."""

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

    def forward_blocks(self, features: Tensor, lengths: Tensor) -> list[tuple[Tensor, Tensor]]:
        """[(B, T_k, C_k), lengths_k] after ResNet stage 3, stage 4 and the last conv block,
        each averaged over frequency."""
        stages, last = self._trunk(features, lengths)
        out = []
        for x in (stages[2], stages[3], last):
            reduction = features.shape[1] // x.shape[2]
            steps = x.mean(dim=3).transpose(1, 2)
            out.append((steps, (lengths // reduction).clamp(min=1, max=steps.shape[1])))
        return out


# AST ---------------------------------------------------------------------------------------


@dataclass
class ASTConfig:
    n_mels: int = 128  # Kaldi fbank bins (AST: 128)
    max_frames: int = 1024  # frames per window (AST AudioSet: 1024 = 10.24 s)
    patch: int = 16  # patch side
    fstride: int = 10  # patch stride over frequency (overlapping patches)
    tstride: int = 10  # patch stride over time
    dim: int = 768  # DeiT-base width
    depth: int = 12  # transformer blocks
    heads: int = 12  # attention heads
    mlp_ratio: float = 4.0  # MLP hidden = dim * mlp_ratio
    classes: int = 527  # AudioSet head, kept so published checkpoints load strictly
    deit_classes: int = 1000  # DeiT's ImageNet heads (v.head, v.head_dist), unused but saved
    norm_mean: float = -4.2677393  # AST's AudioSet fbank mean ...
    norm_std: float = 4.5689974  # ... and std: input = (x - mean) / (2 * std)
    output: str = "frames"  # frames: tokens averaged over frequency per time column;
    # cls: one (cls + dist)/2 vector per window, windows with 50 % overlap


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, d))


class _Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = _Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = _Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class _PatchEmbed(nn.Module):
    def __init__(self, patch: int, fstride: int, tstride: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(1, dim, kernel_size=patch, stride=(fstride, tstride))


class _DeiT(nn.Module):
    def __init__(self, config: ASTConfig, n_patches: int) -> None:
        super().__init__()
        self.patch_embed = _PatchEmbed(config.patch, config.fstride, config.tstride, config.dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.dist_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n_patches + 2, config.dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.dist_token, std=0.02)
        self.blocks = nn.ModuleList(
            _Block(config.dim, config.heads, config.mlp_ratio) for _ in range(config.depth)
        )
        self.norm = nn.LayerNorm(config.dim, eps=1e-6)
        self.head = nn.Linear(config.dim, config.deit_classes)
        self.head_dist = nn.Linear(config.dim, config.deit_classes)


class AST(nn.Module):
    """Audio Spectrogram Transformer (Gong et al., 2021). Published parameter names
    (`v.*`, `mlp_head.*`). Clips longer than `max_frames` are cut into windows of
    `max_frames` with 50 % overlap; shorter ones are zero-padded as AST does."""

    def __init__(self, config: ASTConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or ASTConfig()
        if config.output not in ("frames", "cls"):
            raise ValueError(f"AST output {config.output!r}: use frames or cls")
        self.f_dim = (config.n_mels - config.patch) // config.fstride + 1
        self.t_dim = (config.max_frames - config.patch) // config.tstride + 1
        self.v = _DeiT(config, self.f_dim * self.t_dim)
        self.mlp_head = nn.Sequential(
            nn.LayerNorm(config.dim), nn.Linear(config.dim, config.classes)
        )

    @property
    def output_dim(self) -> int:
        return self.config.dim

    def _tokens(self, windows: Tensor) -> Tensor:
        cfg = self.config
        x = (windows - cfg.norm_mean) / (cfg.norm_std * 2)
        x = self.v.patch_embed.proj(x.transpose(1, 2)[:, None])  # (N, D, f_dim, t_dim)
        x = x.flatten(2).transpose(1, 2)
        extra = torch.cat([self.v.cls_token, self.v.dist_token], dim=1).expand(x.shape[0], -1, -1)
        x = torch.cat([extra, x], dim=1) + self.v.pos_embed
        for block in self.v.blocks:
            x = block(x)
        return self.v.norm(x)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        cfg = self.config
        _check_input(features, lengths, cfg.n_mels, "AST")
        batch = features.shape[0]
        window = cfg.max_frames
        hop = window // 2 if cfg.output == "cls" else window
        if features.shape[1] > window and cfg.output == "frames":
            raise ValueError(
                f"AST output 'frames' takes at most {window} frames, got {features.shape[1]}"
            )
        patches, counts, n = _windows(features, lengths, window, hop)
        tokens = self._tokens(patches)  # (B*N, 2 + f*t, D)
        if cfg.output == "cls":
            cls = (tokens[:, 0] + tokens[:, 1]) / 2
            return cls.reshape(batch, n, -1), counts
        grid = tokens[:, 2:].reshape(batch, self.f_dim, self.t_dim, -1).mean(dim=1)
        steps = ((lengths - cfg.patch) // cfg.tstride + 1).clamp(min=1, max=self.t_dim)
        return grid, steps


# YAMNet ------------------------------------------------------------------------------------

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
        if self.depthwise is None:
            return F.relu(self.bn(self.conv(x)))
        x = F.relu(self.depthwise_bn(self.depthwise(x)))
        return F.relu(self.pointwise_bn(self.pointwise(x)))


@dataclass
class YAMNetConfig:
    n_mels: int = 64  # input bands (YAMNet: 64)
    patch_frames: int = 96  # frames per patch (0.96 s)
    patch_hop: int = 48  # hop between patches (0.48 s: 50 % overlap)
    width: float = 1.0  # filter multiplier (1.0 = YAMNet; smaller only for tests)
    classes: int = 521  # YAMNet's AudioSet head (521 classes)


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
        _check_input(features, lengths, cfg.n_mels, "YAMNet")
        batch = features.shape[0]
        patches, counts, n = _windows(features, lengths, cfg.patch_frames, cfg.patch_hop)
        x = patches[:, None]
        for layer in self.layers:
            x = layer(x)
        return x.mean(dim=(2, 3)).reshape(batch, n, -1), counts


# Trainable small CNN -------------------------------------------------------------------------


@dataclass
class ConvEncoderConfig:
    n_mels: int = 64  # input feature bins
    channels: tuple[int, ...] = (32, 64, 128)  # conv block widths
    time_pools: int = 2  # the first `time_pools` blocks halve time (reduction 2**time_pools)
    d_model: int = 256  # output size
    dropout: float = 0.1  # before the output projection


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
        _check_input(features, lengths, self.config.n_mels, "ConvEncoder")
        if int(lengths.min()) < self.reduction:
            raise ValueError(f"ConvEncoder: every clip needs at least {self.reduction} frames")
        x = features[:, None]  # (B, 1, T, F)
        for i, block in enumerate(self.blocks):
            x = x * _padding_mask(lengths, x.shape[2])[:, None, :, None]
            x = block(x)
            time_pool = 2 if i < self.config.time_pools else 1
            freq_pool = 2 if x.shape[3] >= 2 else 1
            x = F.max_pool2d(x, (time_pool, freq_pool))
            lengths = lengths // time_pool
        x = x.mean(dim=3).transpose(1, 2)  # (B, T', C)
        x = self.proj(self.dropout(x))
        return x * _padding_mask(lengths, x.shape[1])[:, :, None], lengths


# Registry and loading ----------------------------------------------------------------------


def _vggish_dim(config: VGGishConfig) -> int:
    if config.output == "conv4":
        return config.channels[-1]
    return config.hidden if config.output == "fc2" else config.embedding_dim


# name -> (module class, its config dataclass, the output dim of the stock architecture)
ENCODERS: dict[str, tuple[type[nn.Module], type[Any], Callable[[Any], int]]] = {
    "vggish": (VGGish, VGGishConfig, lambda c: _vggish_dim(c)),
    "cnn14": (Cnn14, PannsConfig, lambda c: c.embedding_dim),
    "resnet38": (ResNet38, PannsConfig, lambda c: c.embedding_dim),
    "ast": (AST, ASTConfig, lambda c: c.dim),
    "yamnet": (YAMNet, YAMNetConfig, lambda c: max(1, int(1024 * c.width))),
    "cnn": (ConvEncoder, ConvEncoderConfig, lambda c: c.d_model),
}

# front-end prefixes in published checkpoints that features.py replaces
_FRONT_END_PREFIXES = ("spectrogram_extractor.", "logmel_extractor.")


@dataclass
class EncoderConfig:
    name: str = "cnn"  # vggish | cnn14 | resnet38 | ast | yamnet | cnn (see ENCODERS)
    weights: str = ""  # state_dict file of a pretrained encoder; "" = trainable small CNN
    freeze: bool = True  # pretrained weights stay fixed (eval mode, no gradients)
    n_mels: int = 64  # feature bins the encoder receives
    # architecture fields of the named encoder's config dataclass (e.g. {"output": "fc2"})
    options: dict[str, Any] = field(default_factory=dict)
    # the small CNN used when there are no weights; its d_model defaults to the output
    # size of the named encoder so a model config works with and without weights
    fallback: dict[str, Any] = field(default_factory=dict)


def _arch_config(name: str, options: dict[str, Any], n_mels: int | None) -> Any:
    try:
        _, config_cls, _ = ENCODERS[name]
    except KeyError:
        known = ", ".join(sorted(ENCODERS))
        raise ValueError(f"Unknown encoder {name!r}; known encoders: {known}.") from None
    known_fields = {f.name for f in fields(config_cls)}
    unknown = sorted(set(options) - known_fields)
    if unknown:
        raise ValueError(
            f"Encoder {name!r} has no option(s) {unknown}; its options: "
            f"{', '.join(sorted(known_fields))}."
        )
    values = dict(options)
    if n_mels is not None and "n_mels" in known_fields:
        values.setdefault("n_mels", n_mels)
    for key, value in values.items():  # JSON turns tuples into lists
        if isinstance(value, list):
            values[key] = tuple(value)
    return config_cls(**values)


def encoder_output_dim(config: EncoderConfig) -> int:
    """The embedding size `build_encoder(config)` produces, without building it."""
    if not config.weights and config.name != "cnn":
        fallback = _arch_config("cnn", _fallback_options(config), config.n_mels)
        return int(fallback.d_model)
    arch = _arch_config(config.name, config.options, config.n_mels)
    return int(ENCODERS[config.name][2](arch))


def _fallback_options(config: EncoderConfig) -> dict[str, Any]:
    options = dict(config.fallback)
    if "d_model" not in options:
        arch = _arch_config(config.name, config.options, config.n_mels)
        options["d_model"] = ENCODERS[config.name][2](arch)
    return options


class FrozenEncoder(nn.Module):
    """Wraps a pretrained encoder: always in eval mode (BatchNorm statistics and dropout
    stay as trained) and run without gradients."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.encoder.requires_grad_(False)
        self.encoder.eval()

    @property
    def output_dim(self) -> int:
        return int(self.encoder.output_dim)

    def train(self, mode: bool = True) -> FrozenEncoder:
        super().train(mode)
        self.encoder.eval()
        return self

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            return self.encoder(features, lengths)


def read_state_dict(path: Path | str) -> dict[str, Tensor]:
    """A state_dict from a file: a bare state_dict, or one under "model"/"state_dict"
    (PANNs, Lightning); DataParallel's "module." prefix is removed."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"encoder weights file {path} does not exist")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"{path}: not a PyTorch weights file ({exc})") from None
    if isinstance(data, dict):
        for key in ("model", "state_dict"):
            if isinstance(data.get(key), dict):
                data = data[key]
                break
    if not isinstance(data, dict) or not all(isinstance(v, Tensor) for v in data.values()):
        raise ValueError(f"{path}: does not hold a state_dict of tensors")
    return {
        k.removeprefix("module."): v
        for k, v in data.items()
        if not k.removeprefix("module.").startswith(_FRONT_END_PREFIXES)
    }


def load_weights(module: nn.Module, path: Path | str, *, name: str = "") -> None:
    """Strict load with a readable error: missing keys, unexpected keys and shape
    mismatches are listed (a few of each) with the file and the encoder named."""
    state = read_state_dict(path)
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
        for k in own
        if k in state and state[k].shape != own[k].shape
    ]
    if missing or unexpected or shapes:
        parts = []
        for title, items in (
            ("missing", missing),
            ("unexpected", unexpected),
            ("wrong shape", shapes),
        ):
            if items:
                more = f" (+{len(items) - 5} more)" if len(items) > 5 else ""
                shown = ", ".join(items[:5]) + more
                parts.append(f"{len(items)} {title}: {shown}")
        label = name or type(module).__name__
        raise ValueError(f"{path} does not fit encoder {label!r}: " + "; ".join(parts) + ".")
    module.load_state_dict(state, strict=True)


def build_encoder(config: EncoderConfig) -> nn.Module:
    """The encoder a model config asks for: the named architecture with weights loaded from
    `config.weights` (frozen unless `freeze` is off), or, with no weights file, the trainable
    small CNN with the named encoder's output size. No network access."""
    if not config.weights:
        options = _fallback_options(config) if config.name != "cnn" else config.options
        return ConvEncoder(_arch_config("cnn", options, config.n_mels))
    arch = _arch_config(config.name, config.options, config.n_mels)
    encoder = ENCODERS[config.name][0](arch)
    load_weights(encoder, config.weights, name=config.name)
    return FrozenEncoder(encoder) if config.freeze else encoder


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# Run-config names ------------------------------------------------------------------------

# `CaptionerConfig.encoder` -> (ENCODERS name, feature preset of modeling.ml.features the
# network was trained on). "trainable" (no pretrained encoder) is not listed.
PRETRAINED: dict[str, tuple[str, str]] = {
    "vggish": ("vggish", "vggish"),
    "panns": ("cnn14", "panns"),
    "panns_resnet38": ("resnet38", "panns"),
    "ast": ("ast", "ast"),
    "yamnet": ("yamnet", "yamnet"),
}


def pretrained_architecture(name: str, n_mels: int, options: dict[str, Any]) -> nn.Module:
    """The encoder a run config names (a `PRETRAINED` key), randomly initialised: the
    caller loads weights, from the encoder's file (`load_weights`) or from a checkpoint."""
    try:
        registered, _ = PRETRAINED[name]
    except KeyError:
        known = ", ".join(sorted(PRETRAINED))
        raise ValueError(f"Unknown pretrained encoder {name!r}; known: {known}.") from None
    return ENCODERS[registered][0](_arch_config(registered, options, n_mels))


def pretrained_output_dim(name: str, n_mels: int, options: dict[str, Any]) -> int:
    """The embedding size of `pretrained_architecture(...)`, without building it."""
    registered, _ = PRETRAINED[name]
    return int(ENCODERS[registered][2](_arch_config(registered, options, n_mels)))
