"""A pretrained audio encoder in front of any captioner (``CaptionerConfig.encoder``).

``registry.build_model`` returns an ``EncodedCaptioner`` when a model config names an encoder
other than "trainable": the batch's features ``(B, T, F)`` go through the encoder
(``modeling.ml.encoders``) and the captioner reads its embeddings ``(B, T', D)`` with their
lengths ``(B,)``. The inner captioner is the registered model built with ``feature_dim = D``.

No weights are read here (torchaudio's rule: no I/O in a constructor). Training loads the
encoder's file with ``load_encoder_weights``; a checkpoint carries the encoder's weights in its
state dict, so ``load_checkpoint`` rebuilds this module from ``model_args`` and loads strictly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from torch import Tensor, nn

from modeling.ml.config import CaptionerConfig, ConfigError
from modeling.ml.encoders import (
    FrozenEncoder,
    load_weights,
    pretrained_architecture,
    pretrained_output_dim,
)
from modeling.ml.models.base import Batch, Captioner, Memory, State


def encoder_output_dim(config: CaptionerConfig) -> int:
    """D: the size of the embeddings the captioner reads behind ``config.encoder``."""
    try:
        return pretrained_output_dim(config.encoder, config.feature_dim, config.encoder_options)
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


def inner_config(config: CaptionerConfig) -> CaptionerConfig:
    """The captioner's own config: it reads D-sized embeddings and has no encoder."""
    return dataclasses.replace(
        config,
        feature_dim=encoder_output_dim(config),
        encoder="trainable",
        encoder_weights="",
        encoder_options={},
    )


class EncodedCaptioner(Captioner):
    """``audio_encoder`` (frozen unless ``config.encoder_freeze`` is off) then ``captioner``.

    ``config`` is the outer config (feature_dim = the encoder's input bins, the encoder
    fields set); ``captioner.config`` is ``inner_config(config)``.
    """

    def __init__(self, config: CaptionerConfig, captioner: Captioner) -> None:
        super().__init__()
        self.config = config
        encoder = pretrained_architecture(
            config.encoder, config.feature_dim, config.encoder_options
        )
        self.audio_encoder: nn.Module = FrozenEncoder(encoder) if config.encoder_freeze else encoder
        self.captioner = captioner
        self.uses_video = captioner.uses_video  # type: ignore[misc]

    def load_encoder_weights(self, path: str | Path | None = None) -> None:
        """Read the pretrained weights (``config.encoder_weights`` unless ``path``), strictly;
        a missing file raises FileNotFoundError naming it."""
        target = self.audio_encoder
        if isinstance(target, FrozenEncoder):
            target = target.encoder
        load_weights(target, path or self.config.encoder_weights, name=self.config.encoder)

    def embed(self, batch: Batch) -> Batch:
        """The batch with "features" (B, T, F) -> (B, T', D) and "feature_lengths" -> (B,)."""
        features, lengths = self.audio_encoder(batch["features"], batch["feature_lengths"])
        return {**batch, "features": features, "feature_lengths": lengths}

    def forward(self, batch: Batch) -> Tensor:
        return self.captioner(self.embed(batch))

    def encode(self, batch: Batch) -> Memory:
        return self.captioner.encode(self.embed(batch))

    def step(self, memory: Memory, tokens: Tensor, state: State | None) -> tuple[Tensor, State]:
        return self.captioner.step(memory, tokens, state)

    def prepare(self, train_items: Sequence[Any]) -> Sequence[Any]:
        return self.captioner.prepare(train_items)

    @property
    def max_prefix_length(self) -> int | None:
        return self.captioner.max_prefix_length

    # The trainer looks for these optional hooks with hasattr(): they exist here exactly when
    # the inner captioner has them (a property raising AttributeError reads as absent).

    @property
    def training_loss(self) -> Callable[..., Any]:
        # AttributeError when the captioner has none; the hooks are not part of Captioner's
        # interface, so nn.Module's typing sees only a Tensor | Module attribute
        inner = cast(Callable[..., Any], self.captioner.training_loss)
        return lambda batch, **kwargs: inner(self.embed(batch), **kwargs)

    @property
    def pretrain_loss(self) -> Callable[..., Any]:
        inner = cast(Callable[..., Any], self.captioner.pretrain_loss)
        return lambda batch, **kwargs: inner(self.embed(batch), **kwargs)
