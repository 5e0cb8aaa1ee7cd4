"""Audio encoders with one interface: `forward(features (B, T, F), lengths (B,)) ->
(embeddings (B, T', D), lengths' (B,))`.

Pretrained encoders load a state_dict from a file named in the config (`EncoderConfig.weights`);
nothing is downloaded. Without a weights file, `build_encoder` returns the trainable small CNN
(`ConvEncoder`) with the same interface and output size, so every captioner runs offline.

One module per family: ``vggish``, ``panns`` (CNN14, ResNet38), ``spectrogram_transformer``
(AST), ``yamnet`` and ``conv`` (the trainable small CNN), each saying how faithfully it
reproduces the published network; this module is the registry, the weight loading and the
networks of the names run configs use, and re-exports every family's classes. The families'
configs, their output sizes and the run-config names (`PRETRAINED`) are in
`modeling.ml.config_encoders`, which imports no torch (run planning reads them in the web
process).

PANNs CNN14 and VGGish were checked by parameter count (80,753,615 and 72,141,184, the
published figures); ResNet38 here has 73,783,247.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor, nn

from modeling.ml.config_encoders import (
    ARCHITECTURES,
    DEFAULT_OPTIONS,
    PRETRAINED,
    TWO_LEVELS,
    ASTConfig,
    ConvEncoderConfig,
    PannsConfig,
    VGGishConfig,
    YAMNetConfig,
    arch_config,
    pretrained_level_dims,
    pretrained_output_dim,
)
from modeling.ml.encoders.conv import ConvEncoder
from modeling.ml.encoders.panns import Cnn14, ResNet38
from modeling.ml.encoders.spectrogram_transformer import AST
from modeling.ml.encoders.vggish import VGGish
from modeling.ml.encoders.yamnet import YAMNET_LAYERS, YAMNet
from modeling.ml.weights_file import load_file

__all__ = [
    "AST",
    "DEFAULT_OPTIONS",
    "ENCODERS",
    "PRETRAINED",
    "TWO_LEVELS",
    "YAMNET_LAYERS",
    "ASTConfig",
    "Cnn14",
    "ConvEncoder",
    "ConvEncoderConfig",
    "EncoderConfig",
    "FrozenEncoder",
    "PannsConfig",
    "ResNet38",
    "VGGish",
    "VGGishConfig",
    "YAMNet",
    "YAMNetConfig",
    "arch_config",
    "build_encoder",
    "count_parameters",
    "encoder_output_dim",
    "load_weights",
    "pretrained_architecture",
    "pretrained_level_dims",
    "pretrained_output_dim",
    "read_state_dict",
]

# name -> (module class, its config dataclass, the output dim of the stock architecture); the
# configs and sizes are config_encoders.ARCHITECTURES (no torch)
_NETWORKS: dict[str, type[nn.Module]] = {
    "vggish": VGGish,
    "cnn14": Cnn14,
    "resnet38": ResNet38,
    "ast": AST,
    "yamnet": YAMNet,
    "cnn": ConvEncoder,
}
ENCODERS: dict[str, tuple[type[nn.Module], type[Any], Callable[[Any], int]]] = {
    name: (_NETWORKS[name], config_cls, output_dim)
    for name, (config_cls, output_dim) in ARCHITECTURES.items()
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


def encoder_output_dim(config: EncoderConfig) -> int:
    """The embedding size `build_encoder(config)` produces, without building it."""
    if not config.weights and config.name != "cnn":
        fallback = arch_config("cnn", _fallback_options(config), config.n_mels)
        return int(fallback.d_model)
    arch = arch_config(config.name, config.options, config.n_mels)
    return int(ENCODERS[config.name][2](arch))


def _fallback_options(config: EncoderConfig) -> dict[str, Any]:
    options = dict(config.fallback)
    if "d_model" not in options:
        arch = arch_config(config.name, config.options, config.n_mels)
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
        # every ENCODERS architecture has an int output_dim property, which nn.Module's typing
        # (any unknown attribute is a Tensor | Module) cannot see
        return cast(int, self.encoder.output_dim)

    def train(self, mode: bool = True) -> FrozenEncoder:
        super().train(mode)
        self.encoder.eval()
        return self

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            return self.encoder(features, lengths)

    def forward_levels(self, features: Tensor, lengths: Tensor) -> Any:
        """The wrapped encoder's `forward_levels` (see TWO_LEVELS), without gradients."""
        encoder: Any = self.encoder  # an ENCODERS architecture listed in TWO_LEVELS
        with torch.no_grad():
            return encoder.forward_levels(features, lengths)


def read_state_dict(path: Path | str) -> dict[str, Tensor]:
    """A state_dict from a file: a bare state_dict, or one under "model"/"state_dict"
    (PANNs, Lightning); DataParallel's "module." prefix is removed."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"encoder weights file {path} does not exist")
    # PANNs' own files carry numpy arrays (the sampler state) beside the weights
    data = load_file(path)
    if isinstance(data, dict):
        for key in ("model", "state_dict"):
            if isinstance(data.get(key), dict):
                data = data[key]
                break
    if not isinstance(data, dict) or not all(isinstance(v, Tensor) for v in data.values()):
        raise ValueError(
            f"{path}: does not hold a state_dict of tensors (a released file of another "
            "layout goes through `manage.py import_weights` first)"
        )
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
        return ConvEncoder(arch_config("cnn", options, config.n_mels))
    arch = arch_config(config.name, config.options, config.n_mels)
    encoder = ENCODERS[config.name][0](arch)
    load_weights(encoder, config.weights, name=config.name)
    return FrozenEncoder(encoder) if config.freeze else encoder


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# Run-config names (PRETRAINED and its tables: config_encoders) --------------------------


def pretrained_architecture(name: str, n_mels: int, options: dict[str, Any]) -> nn.Module:
    """The encoder a run config names (a `PRETRAINED` key), randomly initialised: the
    caller loads weights, from the encoder's file (`load_weights`) or from a checkpoint."""
    try:
        registered, _ = PRETRAINED[name]
    except KeyError:
        known = ", ".join(sorted(PRETRAINED))
        raise ValueError(f"Unknown pretrained encoder {name!r}; known: {known}.") from None
    return ENCODERS[registered][0](arch_config(registered, options, n_mels))
