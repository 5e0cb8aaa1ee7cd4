"""Named presets of every model config and of the training loop, in one table each.

Model presets: "paper" follows MODELS.md, "small" trains on CPU in minutes, "tiny" is for unit
tests (seconds). Training presets are named after the paper whose recipe they follow. Both
tables are complete once this module is imported (nothing adds to them later), so
``model_preset("maac")`` works in a fresh interpreter. Read them through ``model_preset`` and
``train_preset``, which return copies.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from modeling.ml.config import (
    ACTConfig,
    BiLSTMConfig,
    CaptionerConfig,
    ConfigError,
    LSTMConfig,
    NearestNeighbourConfig,
    TempAttConfig,
    TopDownConfig,
    TrainConfig,
)
from modeling.ml.config_av import AVConfig, MAACConfig, VACTConfig

# ACT's sizes, shared by the V-ACT family (whose configs extend ACT's)
_SMALL_ACT: dict[str, Any] = {
    "encoder_dim": 192,
    "encoder_layers": 4,
    "encoder_heads": 4,
    "decoder_dim": 192,
    "decoder_heads": 4,
    "decoder_layers": 2,
    "dropout": 0.1,
}
_TINY_ACT: dict[str, Any] = {
    "feature_dim": 8,
    "patch_frames": 2,
    "max_frames": 64,
    "encoder_dim": 16,
    "encoder_layers": 1,
    "encoder_heads": 2,
    "decoder_dim": 16,
    "decoder_layers": 1,
    "decoder_heads": 2,
    "ff_mult": 2,
    "max_caption_length": 16,
}


def _vact_presets() -> dict[str, CaptionerConfig]:
    return {
        "paper": VACTConfig(),
        "small": VACTConfig(**_SMALL_ACT),
        "tiny": VACTConfig(video_dim=6, max_video_frames=16, **_TINY_ACT),
    }


MODEL_PRESETS: dict[str, dict[str, CaptionerConfig]] = {
    "nn": {
        "paper": NearestNeighbourConfig(),
        "small": NearestNeighbourConfig(),
        "tiny": NearestNeighbourConfig(feature_dim=8, max_caption_length=12, max_attributes=4),
    },
    "lstm": {
        "paper": LSTMConfig(),
        "small": LSTMConfig(embed_dim=128, encoder_dim=128, decoder_dim=256),
        "tiny": LSTMConfig(feature_dim=8, embed_dim=16, encoder_dim=12, decoder_dim=24),
    },
    "tempatt": {
        "paper": TempAttConfig(),
        "small": TempAttConfig(embed_dim=128, encoder_dim=128, decoder_dim=256),
        "tiny": TempAttConfig(feature_dim=8, embed_dim=16, encoder_dim=12, decoder_dim=24),
    },
    "topdown": {
        "paper": TopDownConfig(),
        "small": TopDownConfig(embed_dim=128, encoder_dim=128, decoder_dim=256),
        "tiny": TopDownConfig(feature_dim=8, embed_dim=16, encoder_dim=12, decoder_dim=24),
    },
    "act": {
        "paper": ACTConfig(),
        "small": ACTConfig(**_SMALL_ACT),
        "tiny": ACTConfig(**_TINY_ACT),
    },
    "bilstm": {
        "paper": BiLSTMConfig(),
        "small": BiLSTMConfig(
            feature_dim=128, encoder_dim=128, embed_dim=128, decoder_dim=256, attention_dim=128
        ),
        "tiny": BiLSTMConfig(
            feature_dim=8, encoder_dim=12, embed_dim=16, decoder_dim=24, attention_dim=12
        ),
    },
    "vact": _vact_presets(),
    "vact_video": _vact_presets(),
    "vact_concat": _vact_presets(),
    "video_only": _vact_presets(),
    "maac": {
        "paper": MAACConfig(),
        "small": MAACConfig(
            num_keywords=100,
            cnn_channels=(32, 64, 128, 128, 256),
            level_dim=128,
            hidden_dim=256,
            attention_dim=128,
        ),
        "tiny": MAACConfig(
            feature_dim=8,
            num_keywords=12,
            top_k=3,
            cnn_channels=(4, 4, 8, 8, 8),
            level_dim=8,
            hidden_dim=16,
            attention_dim=8,
        ),
    },
    "crossmodal": {
        "paper": AVConfig(),
        "small": AVConfig(
            width=192,
            audio_layers=4,
            audio_heads=4,
            fusion_layers=2,
            fusion_heads=4,
            decoder_layers=2,
            decoder_heads=4,
            dropout=0.1,
        ),
        "tiny": AVConfig(
            feature_dim=8,
            max_frames=32,
            audio_pool=2,
            width=16,
            audio_layers=1,
            audio_heads=2,
            video_dim=6,
            max_video_tokens=16,
            fusion_layers=2,
            fusion_heads=2,
            decoder_layers=1,
            decoder_heads=2,
            ff_mult=2,
            max_caption_length=16,
        ),
    },
}

TRAIN_PRESETS: dict[str, TrainConfig] = {
    # Kim et al.: Adam (0.9/0.999/1e-8); lr not given in MODELS.md, 1e-3 is the usual LSTM choice.
    "audiocaps": TrainConfig(lr=1e-3, epochs=30, label_smoothing=0.0),
    # Liu et al.: Adam 1e-4, linear warm-up over the first 5 of 15 epochs, batch 32, smoothing.
    "act": TrainConfig(lr=1e-4, epochs=15, warmup_epochs=5.0, batch_size=32, label_smoothing=0.1),
    # BiLSTM: Adam 1e-4, batch 32, halve lr after 3 validations without gain.
    "bilstm": TrainConfig(
        lr=1e-4, epochs=30, plateau_patience=3, plateau_factor=0.5, label_smoothing=0.0
    ),
    # MAAC as one run: keyword-encoder pre-training (BCE), the cross-entropy stage (Adam 3e-4,
    # 30 epochs, batch 32, lr x 0.98 per epoch, smoothing), then self-critical fine-tuning on
    # CIDEr-D at 5e-5. The paper gives no epoch counts for the first and last stages; 10 each.
    "maac": TrainConfig(
        lr=3e-4,
        epochs=30,
        batch_size=32,
        lr_decay_per_epoch=0.98,
        label_smoothing=0.1,
        pretrain_epochs=10,
        scst_epochs=10,
        scst_lr=5e-5,
    ),
    # MAAC self-critical stage (modeling.ml.scst): Adam 5e-5, no smoothing (no targets).
    "maac_scst": TrainConfig(
        lr=5e-5, epochs=30, batch_size=32, lr_decay_per_epoch=0.98, label_smoothing=0.0
    ),
    # Unit tests: a handful of steps on CPU, no early stopping.
    "tiny": TrainConfig(
        epochs=2,
        batch_size=4,
        lr=3e-3,
        label_smoothing=0.0,
        early_stopping_patience=None,
        amp=False,
        log_every_steps=1,
    ),
}


def model_preset(model_name: str, preset: str = "paper") -> CaptionerConfig:
    """A fresh copy of a named preset; the error lists what exists."""
    try:
        presets = MODEL_PRESETS[model_name]
    except KeyError:
        known = ", ".join(sorted(MODEL_PRESETS))
        raise ConfigError(f"no presets for model '{model_name}' (known models: {known})") from None
    try:
        return dataclasses.replace(presets[preset])
    except KeyError:
        known = ", ".join(sorted(presets))
        raise ConfigError(
            f"model '{model_name}' has no preset '{preset}' (known: {known})"
        ) from None


def train_preset(preset: str = "audiocaps") -> TrainConfig:
    """A fresh copy of a named training preset."""
    try:
        return dataclasses.replace(TRAIN_PRESETS[preset])
    except KeyError:
        known = ", ".join(sorted(TRAIN_PRESETS))
        raise ConfigError(f"no training preset '{preset}' (known: {known})") from None
