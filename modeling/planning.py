"""Planning a training run: what it will train (`run_plan`).

A run of a model gets its paper's recipe (`modeling.ml.presets`), sized by a model preset,
scaled to a number of epochs and changed by the run's `key=value` settings; `run_plan` checks
the result as training would (configs, encoder settings, weight files) and records every way
it differs from the recipe. It reads only modeling/ml's configs and tables, never its PyTorch
modules: the web process plans the runs it starts, and loads no torch
(tests/test_import_graph.py checks). Recording and queuing the run is `modeling.services`;
training it, `modeling.training`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from modeling.ml import catalog
from modeling.ml.config import (
    ConfigError,
    RunConfig,
    apply_overrides,
    check_decoding_config,
    check_train_config,
)
from modeling.ml.config_av import CaptionLengthConfig, VACTConfig, VideoCaptionerConfig
from modeling.ml.config_encoders import DEFAULT_OPTIONS, PRETRAINED, check_encoder_config
from modeling.ml.config_features import feature_preset
from modeling.ml.config_video import ENCODERS, VideoConfig
from modeling.ml.presets import Recipe, describe, model_preset, named_recipe, scaled_epochs
from modeling.scoring import validation_metrics

# Model config fields that name a file, which must lie in ENCODER_WEIGHTS_DIR.
FILE_SETTINGS = ("encoder_weights", "backbone_weights", "word_vectors", "encoder_init")
# The model size preset of a paper's recipe (the others are scaled down).
PAPER_SIZE = "paper"


def model_choices() -> list[tuple[str, str]]:
    """Every model a run may train, as form choices."""
    return [(name, name) for name in sorted(catalog.MODEL_CONFIGS)]


def _sections(overrides: Sequence[str]) -> dict[str, list[str]]:
    """`key=value` overrides by section: "features" and "video" (their prefix removed),
    "run" for the rest."""
    out: dict[str, list[str]] = {"features": [], "video": [], "run": []}
    for item in overrides:
        head = item.strip().split(".", 1)[0]
        if head in ("features", "video"):
            out[head].append(item.strip().removeprefix(f"{head}."))
        else:
            out["run"].append(item)
    return out


def _with_video(model: VideoCaptionerConfig, video: VideoConfig) -> VideoCaptionerConfig:
    """The model config reading what `video` produces: raw frames through its trainable
    frame CNN, or the encoder's features; room for the most video rows a clip can have."""
    if video.encoder == "frames":
        model = dataclasses.replace(model, video_frame_size=video.size)
        rows = video.max_frames
    else:
        model = dataclasses.replace(model, video_frame_size=0, video_dim=video.feature_dim)
        per_chunk = ENCODERS[video.encoder][3]
        rows = -(-video.max_frames // video.chunk_frames) if per_chunk else video.max_frames
    if isinstance(model, VACTConfig):
        return dataclasses.replace(model, max_video_frames=max(model.max_video_frames, rows))
    return dataclasses.replace(model, max_video_tokens=max(model.max_video_tokens, rows))


def weights_file(value: str, *, option: str) -> str:
    """The absolute path of the pretrained weights a run's `option` names: a file in
    ENCODER_WEIGHTS_DIR, by a name relative to it or by its full path.

    A run's settings come from researchers, and a path outside the folder is refused
    before anything looks at the disk, so the answer never tells whether it exists.
    """
    folder = Path(settings.ENCODER_WEIGHTS_DIR).resolve()
    where = "the encoder weights folder (ENCODER_WEIGHTS_DIR on the machine that trains)"
    # normpath folds "..", so "a/../../x" is judged where it really points
    candidate = Path(os.path.normpath(folder / value))
    if not candidate.is_relative_to(folder) or not candidate.resolve().is_relative_to(folder):
        raise ValidationError(
            f"{option}: {value} is not in {where}; name a file there, e.g. panns/cnn14.pth."
        )
    if not candidate.is_file():
        raise ValidationError(f"{option}: no such file {value} in {where}.")
    return str(candidate.resolve())


@dataclass(frozen=True)
class RunPlan:
    """What a run trains with: `config` (TrainingRun.config, see `run_spec`) and `recipe`
    (TrainingRun.recipe, see `recipe_record`)."""

    config: dict[str, Any]
    recipe: dict[str, Any]


def run_spec(
    *, model_name: str, preset: str = "small", overrides: Sequence[str] = ()
) -> dict[str, Any]:
    """The stored config of a run: {"run": RunConfig as a dict, "features": FeatureConfig
    as a dict} and, for models that read video, "video": VideoConfig as a dict (see
    `run_plan`)."""
    return run_plan(model_name=model_name, preset=preset, overrides=overrides).config


def run_plan(
    *,
    model_name: str,
    preset: str = "small",
    overrides: Sequence[str] = (),
    epochs: int | None = None,
    recipe: str = "",
) -> RunPlan:
    """The config of a run of `model_name` and the record of its recipe.

    The recipe named `recipe` ("" the model's paper recipe,
    `modeling.ml.presets.default_recipe`; a recipe named by source such as "maac-code",
    `modeling.ml.presets.NAMED_RECIPES`) sets the training,
    vocabulary, decoding and input features; `preset` sizes the model; `epochs` scales every
    stage of the recipe to that many caption epochs; then the config's own adaptations (a
    MAAC backbone without pretrained weights has nothing to keep frozen) and the `key=value`
    `overrides`, which win: `features.*` keys set the feature config, `video.*` the video
    config, the others the RunConfig (`train.epochs=3`, `model.dropout=0.1`)."""
    sections = _sections(overrides)
    try:
        catalog.config_class(model_name)
        recipe_name = recipe or model_name
        chosen = named_recipe(model_name, recipe_name)
        base = RunConfig(
            model_name=model_name,
            model=dataclasses.replace(model_preset(model_name, preset), **chosen.model),
            vocab=chosen.vocab,
            train=chosen.train_config(),
            decoding=chosen.decoding,
        )
        run = base
        if epochs is not None:
            run = dataclasses.replace(run, train=scaled_epochs(run.train, epochs))
        scaled = _changed_keys(base, run)
        set_keys = {item.split("=", 1)[0].strip() for item in sections["run"]}
        run = apply_overrides(run, sections["run"])
        adapted: dict[str, str] = {}
        for key, (value, reason) in run.model.adapted_training(run.train).items():
            if f"train.{key}" not in set_keys:
                run = apply_overrides(run, {f"train.{key}": value})
                adapted[f"train.{key}"] = reason
        check_train_config(run.train)
        check_decoding_config(run.decoding)
        run.model.check_training(run.train)
        validation_metrics(run.train.plateau_metric)  # a figure the validation can give
        # a pretrained encoder reads the features it was trained on (features.* still apply)
        front_end = chosen.features
        if run.model.encoder != "trainable":
            front_end = PRETRAINED[run.model.encoder][1]
            defaults = DEFAULT_OPTIONS.get(run.model.encoder, {})
            options = {**defaults, **run.model.encoder_options}
            run = dataclasses.replace(
                run, model=dataclasses.replace(run.model, encoder_options=options)
            )
        features = apply_overrides(feature_preset(front_end), sections["features"])
        # the model reads the features it is given, whatever its paper used
        model = dataclasses.replace(run.model, feature_dim=features.n_features)
        check_encoder_config(model_name, model)
        for name in FILE_SETTINGS:
            value = getattr(model, name, "")
            if value:
                resolved: dict[str, Any] = {name: weights_file(value, option=f"model.{name}")}
                model = dataclasses.replace(model, **resolved)
        video = None
        if catalog.uses_video(model_name):
            # every registered model that reads video has one of these configs
            assert isinstance(model, VideoCaptionerConfig)
            video = apply_overrides(VideoConfig(), sections["video"])
            if video.weights:
                video = dataclasses.replace(
                    video, weights=weights_file(video.weights, option="video.weights")
                )
            model = _with_video(model, video)
        elif sections["video"]:
            raise ValidationError(
                f"Model {model_name} reads no video; drop {', '.join(sections['video'])}."
            )
        if isinstance(model, CaptionLengthConfig):
            # room for the longest caption the vocabulary keeps, plus <bos> and <eos>
            longest = run.vocab.max_length + 2
            model = dataclasses.replace(
                model, max_caption_length=max(model.max_caption_length, longest)
            )
        run = dataclasses.replace(run, model=model)
    except (ConfigError, KeyError, ValueError) as exc:
        raise ValidationError(str(exc)) from None
    spec = {"run": dataclasses.asdict(run), "features": features.to_dict()}
    if video is not None:
        spec["video"] = video.to_dict()
    record = recipe_record(
        chosen,
        name=recipe_name,
        model_name=model_name,
        base=base,
        run=run,
        preset=preset,
        epochs=epochs,
        scaled=scaled,
        set_keys=set_keys,
        adapted=adapted,
        front_end=front_end,
        feature_overrides=sections["features"],
    )
    return RunPlan(config=spec, recipe=record)


def _flat(run: RunConfig, model_keys: Sequence[str] = ()) -> dict[str, Any]:
    """The recipe's parts of a RunConfig by dotted key: train.*, vocab.*, decoding.* and
    the named model.* fields."""
    out: dict[str, Any] = {}
    for section in ("train", "vocab", "decoding"):
        for key, value in dataclasses.asdict(getattr(run, section)).items():
            out[f"{section}.{key}"] = list(value) if isinstance(value, tuple) else value
    for key in model_keys:
        out[f"model.{key}"] = getattr(run.model, key)
    return out


def _changed_keys(before: RunConfig, after: RunConfig) -> set[str]:
    old, new = _flat(before), _flat(after)
    return {key for key in old if old[key] != new[key]}


def recipe_record(
    recipe: Recipe,
    *,
    name: str = "",
    model_name: str,
    base: RunConfig,
    run: RunConfig,
    preset: str,
    epochs: int | None,
    scaled: set[str],
    set_keys: set[str],
    adapted: dict[str, str],
    front_end: str,
    feature_overrides: Sequence[str],
) -> dict[str, Any]:
    """What TrainingRun.recipe keeps: the paper, the recipe in words, and every way the run
    differs from it, each with why: "set" (the run's settings), "scaled" (its size preset,
    its epochs) or "adapted" (what the recipe needs and the run lacks), and the recipe's
    notes on what it does not reproduce."""
    changes: list[dict[str, Any]] = []
    if preset != PAPER_SIZE:
        changes.append(
            {
                "setting": "model size",
                "recipe": PAPER_SIZE,
                "run": preset,
                "why": "scaled",
                "reason": f"the {preset} preset's layer sizes, not the paper's",
            }
        )
    old, new = _flat(base, list(recipe.model)), _flat(run, list(recipe.model))
    for key in old:
        if old[key] == new[key]:
            continue
        why, reason = "set", "the run's settings"
        if key in adapted:
            why, reason = "adapted", adapted[key]
        elif key in scaled and key not in set_keys:
            why, reason = "scaled", f"the recipe scaled to {epochs} caption epochs"
        changes.append(
            {"setting": key, "recipe": old[key], "run": new[key], "why": why, "reason": reason}
        )
    if front_end != recipe.features:
        changes.append(
            {
                "setting": "features",
                "recipe": recipe.features,
                "run": front_end,
                "why": "adapted",
                "reason": f"the front end the {run.model.encoder} encoder was trained on",
            }
        )
    for item in feature_overrides:
        key, _, value = item.partition("=")
        changes.append(
            {
                "setting": f"features.{key.strip()}",
                "recipe": feature_preset(front_end).to_dict().get(key.strip()),
                "run": value.strip(),
                "why": "set",
                "reason": "the run's settings",
            }
        )
    return {
        "model": model_name,
        "name": name or model_name,
        "paper": recipe.paper,
        "summary": describe(recipe),
        "changes": changes,
        "notes": list(recipe.notes),
    }
