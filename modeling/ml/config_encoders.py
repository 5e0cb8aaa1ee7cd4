"""The audio encoders' settings, without their networks (no torch).

Each family's architecture config (the networks are in ``modeling.ml.encoders``, one module per
family, which import their configs from here as the captioners in ``models/`` import theirs
from ``config``), the size each outputs, the names run configs use for the pretrained ones
(``PRETRAINED``) with the feature preset each was trained on and the options a run gets by
default, and the checks a captioner config's encoder settings pass before anything is built.
Run planning makes these checks in the web process, which never loads torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from modeling.ml.config import CaptionerConfig, ConfigError

# Architectures ---------------------------------------------------------------------------


@dataclass
class ConvEncoderConfig:
    n_mels: int = 64  # input feature bins
    channels: tuple[int, ...] = (32, 64, 128)  # conv block widths
    time_pools: int = 2  # the first `time_pools` blocks halve time (reduction 2**time_pools)
    d_model: int = 256  # output size
    dropout: float = 0.1  # before the output projection


@dataclass
class PannsConfig:
    n_mels: int = 64  # input bands (PANNs: 64)
    widths: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048)  # CNN14 conv blocks
    resnet_layers: tuple[int, ...] = (3, 4, 6, 3)  # ResNet38 basic blocks per stage
    embedding_dim: int = 2048  # fc1 width (and CNN14's last block)
    classes: int = 527  # AudioSet head, kept so published checkpoints load strictly


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


@dataclass
class VGGishConfig:
    n_mels: int = 64  # input bands (VGGish: 64)
    patch_frames: int = 96  # frames per example (0.96 s at 100 frames/s)
    channels: tuple[int, ...] = (64, 128, 256, 256, 512, 512)  # conv widths (VGGish)
    hidden: int = 4096  # fc1/fc2 width
    embedding_dim: int = 128  # final embedding
    output: str = "embedding"  # embedding (128) | fc2 (4096) | conv4 (512 per 0.16 s step)


def vggish_output_dim(config: VGGishConfig) -> int:
    if config.output == "conv4":
        return config.channels[-1]
    return config.hidden if config.output == "fc2" else config.embedding_dim


@dataclass
class YAMNetConfig:
    n_mels: int = 64  # input bands (YAMNet: 64)
    patch_frames: int = 96  # frames per patch (0.96 s)
    patch_hop: int = 48  # hop between patches (0.48 s: 50 % overlap)
    width: float = 1.0  # filter multiplier (1.0 = YAMNet; smaller only for tests)
    classes: int = 521  # YAMNet's AudioSet head (521 classes)


# name -> (its config dataclass, the output dim of the stock architecture); the networks are
# modeling.ml.encoders.ENCODERS
ARCHITECTURES: dict[str, tuple[type[Any], Callable[[Any], int]]] = {
    "vggish": (VGGishConfig, lambda c: vggish_output_dim(c)),
    "cnn14": (PannsConfig, lambda c: c.embedding_dim),
    "resnet38": (PannsConfig, lambda c: c.embedding_dim),
    "ast": (ASTConfig, lambda c: c.dim),
    "yamnet": (YAMNetConfig, lambda c: max(1, int(1024 * c.width))),
    "cnn": (ConvEncoderConfig, lambda c: c.d_model),
}


def arch_config(name: str, options: dict[str, Any], n_mels: int | None) -> Any:
    """The config dataclass of architecture `name` with `options` (and `n_mels` unless the
    options set it); ValueError names an unknown architecture or option."""
    try:
        config_cls, _ = ARCHITECTURES[name]
    except KeyError:
        known = ", ".join(sorted(ARCHITECTURES))
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


# Run-config names ------------------------------------------------------------------------

# `CaptionerConfig.encoder` -> (ARCHITECTURES name, feature preset of modeling.ml.features the
# network was trained on). "trainable" (no pretrained encoder) is not listed.
PRETRAINED: dict[str, tuple[str, str]] = {
    "vggish": ("vggish", "vggish"),
    "panns": ("cnn14", "panns"),
    "panns_resnet38": ("resnet38", "panns"),
    "ast": ("ast", "ast"),
    "yamnet": ("yamnet", "yamnet"),
}


# Encoder options a run gets unless its model.encoder_options set them; run setup writes them
# into the run config, so a checkpoint names them and a changed default never alters it.
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    # the BiLSTM paper reads AST's [CLS] output (one vector per window, 50 % overlap)
    "ast": {"output": "cls"},
}

# Encoders whose `forward_levels` gives a high and a mid level from one pass (what TopDown's
# multi-scale encoder reads), and those levels' sizes: VGGish's fc2 and conv4.
TWO_LEVELS: dict[str, Callable[[Any], tuple[int, int]]] = {
    "vggish": lambda c: (c.hidden, c.channels[-1]),
}


def pretrained_level_dims(
    name: str, n_mels: int, options: dict[str, Any]
) -> tuple[int, int] | None:
    """(high, mid) sizes of the two levels the run-config encoder `name` provides; None when
    it provides one level only."""
    registered, _ = PRETRAINED[name]
    if registered not in TWO_LEVELS:
        return None
    return TWO_LEVELS[registered](arch_config(registered, options, n_mels))


def pretrained_output_dim(name: str, n_mels: int, options: dict[str, Any]) -> int:
    """The embedding size of the encoder a run config names (a `PRETRAINED` key), without
    building it."""
    registered, _ = PRETRAINED[name]
    return int(ARCHITECTURES[registered][1](arch_config(registered, options, n_mels)))


# A captioner config's encoder ------------------------------------------------------------


def encoder_output_dim(config: CaptionerConfig) -> int:
    """D: the size of the embeddings the captioner reads behind ``config.encoder``."""
    try:
        return pretrained_output_dim(config.encoder, config.feature_dim, config.encoder_options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config key 'model.encoder_options': {exc}") from None


def two_level_dims(config: CaptionerConfig) -> tuple[int, int] | None:
    """(high, mid) sizes when the captioner reads two levels and its encoder provides them."""
    if not config.reads_two_levels():
        return None
    try:
        return pretrained_level_dims(config.encoder, config.feature_dim, config.encoder_options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config key 'model.encoder_options': {exc}") from None


def check_encoder_config(model_name: str, config: CaptionerConfig) -> None:
    """Raise ConfigError for an encoder setting that cannot work with this model."""
    if config.encoder == "trainable":
        if config.encoder_weights or config.encoder_options:
            raise ConfigError(
                "model.encoder_weights and model.encoder_options need model.encoder set to a "
                "pretrained encoder (vggish, panns, panns_resnet38, ast, yamnet)"
            )
        return
    if model_name == "nn":
        # 1NN's bank holds the raw training features; it has nothing to train an encoder with
        raise ConfigError("model 'nn' cannot use a pretrained encoder (model.encoder)")
    if getattr(config, "mid_feature_dim", 0):
        raise ConfigError(
            "model.mid_feature_dim > 0 reads a second feature level aligned with the input "
            "frames; a pretrained encoder changes the frame rate, so set one or the other"
        )
    if not config.encoder_weights:
        raise ConfigError(
            f"model.encoder={config.encoder!r} needs model.encoder_weights: the path of its "
            "state_dict file (weights are never downloaded)"
        )
    encoder_output_dim(config)
