"""A pretrained audio encoder in front of any captioner (``CaptionerConfig.encoder``).

``registry.build_model`` returns an ``EncodedCaptioner`` when a model config names an encoder
other than "trainable": the batch's features ``(B, T, F)`` go through the encoder
(``modeling.ml.encoders``) and the captioner reads its embeddings ``(B, T', D)`` with their
lengths ``(B,)``. The inner captioner is the registered model built with ``feature_dim = D``.
A captioner that reads two levels (TopDown) behind an encoder that provides them (VGGish:
fc2 and conv4) gets both: "features" the high level and "mid_features" /
"mid_feature_lengths" the mid level.

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

from modeling.ml.config import CaptionerConfig
from modeling.ml.config_encoders import encoder_output_dim, two_level_dims
from modeling.ml.encoders import FrozenEncoder, load_weights, pretrained_architecture
from modeling.ml.models.base import Batch, Captioner, Memory, State
from modeling.ml.vocab import Vocabulary


def inner_config(config: CaptionerConfig) -> CaptionerConfig:
    """The captioner's own config: it reads D-sized embeddings (or the encoder's two
    levels) and has no encoder."""
    levels = two_level_dims(config)
    inner = dataclasses.replace(
        config,
        feature_dim=levels[0] if levels else encoder_output_dim(config),
        encoder="trainable",
        encoder_weights="",
        encoder_options={},
    )
    if levels:
        # only configs with a mid level read two (reads_two_levels)
        mid: dict[str, Any] = {"mid_feature_dim": levels[1]}
        inner = dataclasses.replace(inner, **mid)
    return inner


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
        self.two_levels = two_level_dims(config) is not None

    def load_encoder_weights(self, path: str | Path | None = None) -> None:
        """Read the pretrained weights (``config.encoder_weights`` unless ``path``), strictly;
        a missing file raises FileNotFoundError naming it."""
        target = self.audio_encoder
        if isinstance(target, FrozenEncoder):
            target = target.encoder
        load_weights(target, path or self.config.encoder_weights, name=self.config.encoder)

    def embed(self, batch: Batch) -> Batch:
        """The batch with "features" (B, T, F) -> (B, T', D) and "feature_lengths" -> (B,);
        with two levels also "mid_features" (B, T'', D_mid) and "mid_feature_lengths"."""
        if self.two_levels:
            encoder = cast(Any, self.audio_encoder)  # forward_levels: see encoders.TWO_LEVELS
            (high, high_lengths), (mid, mid_lengths) = encoder.forward_levels(
                batch["features"], batch["feature_lengths"]
            )
            return {
                **batch,
                "features": high,
                "feature_lengths": high_lengths,
                "mid_features": mid,
                "mid_feature_lengths": mid_lengths,
            }
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

    def load_word_vectors(self, path: str | Path, vocab: Vocabulary) -> int:
        return self.captioner.load_word_vectors(path, vocab)

    @property
    def max_prefix_length(self) -> int | None:
        return self.captioner.max_prefix_length

    # The trainer looks for these optional hooks with hasattr()/getattr(): they exist here
    # exactly when the inner captioner has them (a property raising AttributeError reads as
    # absent). The hooks are not part of Captioner's interface, so nn.Module's typing sees
    # only a Tensor | Module attribute.

    @property
    def pretrain_loss(self) -> Callable[..., Any]:
        inner = cast(Callable[..., Any], self.captioner.pretrain_loss)
        return lambda batch, **kwargs: inner(self.embed(batch), **kwargs)

    @property
    def pretrain_frozen_parameters(self) -> Callable[[], Any]:
        return cast(Callable[[], Any], self.captioner.pretrain_frozen_parameters)

    @property
    def pretrain_per_caption(self) -> bool:
        return bool(getattr(self.captioner, "pretrain_per_caption", False))
