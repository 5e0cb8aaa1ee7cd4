from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from modeling.ml.config import (
    ConfigError,
    LSTMConfig,
    RunConfig,
    TopDownConfig,
    TrainConfig,
    apply_overrides,
    config_from_dict,
)
from modeling.ml.config_av import CaptionLengthConfig, VideoCaptionerConfig
from modeling.ml.presets import (
    MODEL_PRESETS,
    RECIPES,
    TRAIN_PRESETS,
    default_recipe,
    model_preset,
    scaled_epochs,
    train_preset,
)
from modeling.ml.registry import MODELS, run_config, run_config_from_dict


def test_overrides_set_nested_fields_with_their_types():
    run = run_config("topdown", preset="small")
    run = apply_overrides(
        run,
        [
            "train.lr=3e-4",
            "train.epochs=7",
            "train.amp=false",
            "train.grad_clip=none",
            "train.betas=0.8,0.99",
            "model.aligned_attention=no",
            "model.attribute_source=labels",
        ],
    )
    assert run.train.lr == 3e-4
    assert run.train.epochs == 7
    assert run.train.amp is False
    assert run.train.grad_clip is None
    assert run.train.betas == (0.8, 0.99)
    assert isinstance(run.model, TopDownConfig)
    assert run.model.aligned_attention is False
    assert run.model.attribute_source == "labels"


def test_overrides_return_a_copy():
    run = RunConfig()
    apply_overrides(run, {"train.lr": 0.5})
    assert run.train.lr == TrainConfig().lr


def test_unknown_override_key_is_named_with_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown config key 'train\.lrr'.*known: .*\blr\b"):
        apply_overrides(RunConfig(), ["train.lrr=1"])


def test_wrongly_typed_override_names_the_key():
    with pytest.raises(ConfigError, match=r"config key 'train\.epochs': expected an integer"):
        apply_overrides(RunConfig(), ["train.epochs=many"])


def test_bool_override_rejects_other_words():
    with pytest.raises(ConfigError, match=r"train\.amp.*true/false"):
        apply_overrides(RunConfig(), ["train.amp=maybe"])


def test_literal_override_lists_the_allowed_values():
    with pytest.raises(ConfigError, match=r"train\.optimizer.*'adam', 'adamw'"):
        apply_overrides(RunConfig(), ["train.optimizer=sgd"])


def test_override_of_a_whole_section_is_refused():
    with pytest.raises(ConfigError, match="is a section"):
        apply_overrides(RunConfig(), ["train=3"])


def test_override_without_equals_sign_is_refused():
    with pytest.raises(ConfigError, match="not of the form key=value"):
        apply_overrides(RunConfig(), ["train.lr"])


def test_config_from_dict_is_strict_about_unknown_keys():
    with pytest.raises(ConfigError, match="unknown config key 'hidden'"):
        config_from_dict(LSTMConfig, {"hidden": 3})


def test_config_from_dict_turns_json_lists_into_tuples():
    assert config_from_dict(TrainConfig, {"betas": [0.5, 0.6]}).betas == (0.5, 0.6)


def test_run_config_round_trips_through_a_dict():
    run = run_config("act", preset="tiny", train=train_preset("act"))
    assert run_config_from_dict(dataclasses.asdict(run)) == run


def test_presets_are_fresh_copies():
    config = model_preset("lstm", "tiny")
    assert isinstance(config, LSTMConfig)
    config.embed_dim = 999
    fresh = model_preset("lstm", "tiny")
    assert isinstance(fresh, LSTMConfig)
    assert fresh.embed_dim != 999


def test_every_model_has_its_presets():
    assert set(MODEL_PRESETS) == set(MODELS)
    assert all(set(presets) == {"paper", "small", "tiny"} for presets in MODEL_PRESETS.values())


def test_the_config_unions_name_exactly_the_configs_with_those_fields():
    # run setup (modeling.planning, benchmarks/train_synthscenes.py) sizes a model by these
    # unions; a new config with a caption-length or video field must join them
    for captioner, config in MODELS.values():
        fields = {f.name for f in dataclasses.fields(config)}
        assert issubclass(config, CaptionLengthConfig) == ("max_caption_length" in fields)
        assert issubclass(config, VideoCaptionerConfig) == captioner.uses_video
        assert issubclass(config, VideoCaptionerConfig) == ("video_frame_size" in fields)


def test_presets_need_no_other_import_first():
    # a fresh interpreter: the registry once added the audio-visual presets when imported
    code = (
        "import sys\n"
        "from modeling.ml.presets import default_recipe, model_preset, train_preset\n"
        "model_preset('maac'), model_preset('vact', 'tiny'), train_preset('maac')\n"
        "default_recipe('crossmodal').train_config()\n"
        "assert 'modeling.ml.registry' not in sys.modules\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"no preset 'huge' .*known: paper, small, tiny"):
        model_preset("lstm", "huge")


def test_unknown_training_preset_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"no training preset 'fast'.*act, act-code, audiocaps"):
        train_preset("fast")


def test_every_model_has_a_recipe_whose_presets_exist():
    assert set(RECIPES) == set(MODELS)
    assert all(recipe.train in TRAIN_PRESETS for recipe in RECIPES.values())


def test_recipes_are_fresh_copies():
    recipe = default_recipe("crossmodal")
    recipe.model["mbp"] = False
    recipe.vocab.min_count = 99
    fresh = default_recipe("crossmodal")
    assert fresh.model == {"mbp": True}
    assert fresh.vocab.min_count == 1


def test_an_unknown_model_has_no_recipe():
    with pytest.raises(ConfigError, match="no recipe for model 'huge'"):
        default_recipe("huge")


def test_scaling_a_recipe_scales_every_stage_and_the_warm_up():
    maac = scaled_epochs(train_preset("maac"), 3)  # 80 + 25 / 30 / 55 epochs -> 3 captions
    assert (maac.pretrain_frozen_epochs, maac.pretrain_epochs, maac.epochs, maac.scst_epochs) == (
        8,
        2,
        3,
        6,
    )
    act = scaled_epochs(train_preset("act"), 3)  # 5 warm-up epochs of 15
    assert (act.epochs, act.warmup_epochs) == (3, 1.0)
    tiny = scaled_epochs(train_preset("maac"), 1)  # a stage the recipe has keeps an epoch
    assert (tiny.pretrain_epochs, tiny.scst_epochs) == (1, 2)
    assert scaled_epochs(train_preset("act"), 1).pretrain_epochs == 0  # and none gets one


def test_scaling_to_no_epochs_is_refused():
    with pytest.raises(ConfigError, match="epochs: must be at least 1"):
        scaled_epochs(train_preset("act"), 0)


def test_a_run_recorded_before_model_form_existed_keeps_the_paper_form():
    recorded = dataclasses.asdict(run_config("act"))
    del recorded["model"]["form"]
    assert run_config_from_dict(recorded).model.form == "paper"  # type: ignore[attr-defined]
    assert run_config("act").model.form == "code"  # type: ignore[attr-defined]
