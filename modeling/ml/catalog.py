"""The captioners by name, without their PyTorch modules: each one's config class and whether
it reads video. Run planning and the forms that list the models read this (they never load
torch); ``registry`` pairs every name here with its module class, and
``tests/modeling/test_registry.py`` checks that the two agree.
"""

from __future__ import annotations

from modeling.ml.config import (
    ACTConfig,
    BiLSTMConfig,
    CaptionerConfig,
    LSTMConfig,
    NearestNeighbourConfig,
    TempAttConfig,
    TopDownConfig,
)
from modeling.ml.config_av import AVConfig, MAACConfig, VACTConfig

MODEL_CONFIGS: dict[str, type[CaptionerConfig]] = {
    "nn": NearestNeighbourConfig,
    "lstm": LSTMConfig,
    "tempatt": TempAttConfig,
    "topdown": TopDownConfig,
    "act": ACTConfig,
    "bilstm": BiLSTMConfig,
    "vact": VACTConfig,
    "vact_video": VACTConfig,
    "vact_concat": VACTConfig,
    "video_only": VACTConfig,
    "maac": MAACConfig,
    "crossmodal": AVConfig,
}

# the models whose batches carry batch["video"] (their module's `uses_video`)
VIDEO_MODELS = frozenset({"vact", "vact_video", "vact_concat", "video_only", "crossmodal"})


class UnknownModelError(KeyError):
    """A model name that is not in MODEL_CONFIGS; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would repr() the message, quotes and all
        return str(self.args[0])


def config_class(name: str) -> type[CaptionerConfig]:
    """The config class of model ``name``; UnknownModelError lists the known models."""
    try:
        return MODEL_CONFIGS[name]
    except KeyError:
        known = ", ".join(sorted(MODEL_CONFIGS))
        raise UnknownModelError(f"unknown model '{name}' (known models: {known})") from None


def uses_video(name: str) -> bool:
    """Whether model ``name`` reads video (batch["video"])."""
    config_class(name)
    return name in VIDEO_MODELS
