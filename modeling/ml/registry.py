"""Model registry: name -> (captioner class, config class), plus builders used by checkpoints.

The names, config classes and which models read video are ``catalog``'s (no torch: run
planning reads it); this module adds the PyTorch modules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from modeling.ml import catalog

# `uses_video` and `UnknownModelError` are the catalog's; checkpoints and scripts find them here
from modeling.ml.catalog import MODEL_CONFIGS, UnknownModelError, uses_video  # noqa: F401
from modeling.ml.config import (
    CaptionerConfig,
    ConfigError,
    DecodingConfig,
    RunConfig,
    TrainConfig,
    VocabConfig,
    config_from_dict,
    recorded_model_args,
)
from modeling.ml.config_encoders import check_encoder_config
from modeling.ml.models.act import ACTCaptioner
from modeling.ml.models.av import AVCaptioner
from modeling.ml.models.base import Captioner
from modeling.ml.models.bilstm import BiLSTMCaptioner
from modeling.ml.models.encoded import EncodedCaptioner, inner_config
from modeling.ml.models.lstm import LSTMCaptioner
from modeling.ml.models.maac import MAACCaptioner
from modeling.ml.models.nn_retrieval import NearestNeighbourCaptioner
from modeling.ml.models.tempatt import TempAttCaptioner
from modeling.ml.models.topdown import TopDownCaptioner
from modeling.ml.models.vact import (
    ConcatCaptioner,
    VACTCaptioner,
    VACTVideoCaptioner,
    VideoOnlyCaptioner,
)
from modeling.ml.presets import model_preset

# name -> module class; the config classes (and which models read video) are the catalog's,
# which imports no torch
_CAPTIONERS: dict[str, type[Captioner]] = {
    "nn": NearestNeighbourCaptioner,
    "lstm": LSTMCaptioner,
    "tempatt": TempAttCaptioner,
    "topdown": TopDownCaptioner,
    "act": ACTCaptioner,
    "bilstm": BiLSTMCaptioner,
    "vact": VACTCaptioner,
    "vact_video": VACTVideoCaptioner,
    "vact_concat": ConcatCaptioner,
    "video_only": VideoOnlyCaptioner,
    "maac": MAACCaptioner,
    "crossmodal": AVCaptioner,
}
MODELS: dict[str, tuple[type[Captioner], type[CaptionerConfig]]] = {
    name: (captioner, MODEL_CONFIGS[name]) for name, captioner in _CAPTIONERS.items()
}


def lookup(name: str) -> tuple[type[Captioner], type[CaptionerConfig]]:
    """The module and config classes of model ``name``; UnknownModelError lists the known
    models."""
    catalog.config_class(name)
    return MODELS[name]


def model_config(
    name: str,
    data: CaptionerConfig | Mapping[str, Any] | None = None,
) -> CaptionerConfig:
    """The config of model ``name``: the "paper" preset, a given instance, or a dict (strict)."""
    _, config_class = lookup(name)
    if data is None:
        return model_preset(name, "paper")
    if isinstance(data, CaptionerConfig):
        if type(data) is not config_class:
            raise ConfigError(
                f"model '{name}' takes a {config_class.__name__}, not a {type(data).__name__}"
            )
        return data
    return config_from_dict(config_class, data, where="model.")


def build_model(
    name: str,
    config: CaptionerConfig | Mapping[str, Any] | None = None,
    *,
    vocab_size: int | None = None,
) -> Captioner:
    """Instantiate model ``name``; ``vocab_size`` (from the Vocabulary) overrides the config's."""
    model_class, _ = lookup(name)
    config = model_config(name, config)
    if vocab_size is not None:
        config = dataclasses.replace(config, vocab_size=vocab_size)
    if config.vocab_size < 5:
        raise ConfigError(
            f"model '{name}': vocab_size must cover the 4 specials and a word, "
            f"got {config.vocab_size}"
        )
    check_encoder_config(name, config)
    if config.encoder == "trainable":
        return model_class(config)
    # a pretrained encoder in front; its weights come later (training: the encoder's file,
    # inference: the checkpoint's state dict)
    return EncodedCaptioner(config, model_class(inner_config(config)))


def run_config_from_dict(data: Mapping[str, Any]) -> RunConfig:
    """Rebuild a RunConfig from ``asdict`` output; the model section follows ``model_name``."""
    unknown = set(data) - {f.name for f in dataclasses.fields(RunConfig)}
    if unknown:
        raise ConfigError(f"unknown config key '{sorted(unknown)[0]}' for RunConfig")
    name = data.get("model_name", RunConfig.model_name)
    if not isinstance(name, str):
        raise ConfigError(f"config key 'model_name': expected text, got {name!r}")
    recorded = data.get("model")
    return RunConfig(
        model_name=name,
        # a run recorded before a model field existed computes as it did then
        model=model_config(
            name,
            recorded_model_args(lookup(name)[1], recorded)
            if isinstance(recorded, Mapping)
            else recorded or model_preset(name, "paper"),
        ),
        vocab=config_from_dict(VocabConfig, data.get("vocab", {}), where="vocab."),
        train=config_from_dict(TrainConfig, data.get("train", {}), where="train."),
        # runs recorded before decoding settings existed decode as they did: beam 3
        decoding=config_from_dict(DecodingConfig, data.get("decoding", {}), where="decoding."),
    )


def run_config(
    model_name: str, *, preset: str = "paper", train: TrainConfig | None = None
) -> RunConfig:
    """A RunConfig for ``model_name`` from a model preset (and an optional TrainConfig)."""
    lookup(model_name)
    return RunConfig(
        model_name=model_name, model=model_preset(model_name, preset), train=train or TrainConfig()
    )
