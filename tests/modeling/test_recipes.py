"""Each model's paper recipe is what its runs train with by default, and each run records
the recipe and every way it differs from it (modeling.planning.run_plan). The expected
figures are the papers' (issue 20, MODELS.md), written out here rather than read from
modeling.ml.presets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from modeling import datasets, planning
from modeling.ml.registry import MODELS, run_config_from_dict
from modeling.ml.vocab import SPECIALS


def _plan(model: str, *overrides: str, preset: str = "paper", **kw: Any) -> planning.RunPlan:
    return planning.run_plan(model_name=model, preset=preset, overrides=overrides, **kw)


def _train(plan: planning.RunPlan) -> dict[str, Any]:
    return plan.config["run"]["train"]


def _changes(plan: planning.RunPlan) -> dict[str, tuple[Any, Any, str]]:
    return {c["setting"]: (c["recipe"], c["run"], c["why"]) for c in plan.recipe["changes"]}


@pytest.fixture
def weights_dir(settings: Any, tmp_path: Path) -> Path:
    settings.ENCODER_WEIGHTS_DIR = tmp_path / "weights"
    settings.ENCODER_WEIGHTS_DIR.mkdir()
    for name in ("cnn14.pth", "resnet38.pth", "ast.pth", "cc.en.300.vec"):
        (settings.ENCODER_WEIGHTS_DIR / name).write_bytes(b"not read when a run is planned")
    return settings.ENCODER_WEIGHTS_DIR


# the papers' recipes ----------------------------------------------------------------------


@pytest.mark.parametrize("model", ["act", "vact", "vact_video", "vact_concat", "video_only"])
def test_act_and_v_act_runs_train_as_liu_et_al(model: str) -> None:
    plan = _plan(model)
    train = _train(plan)
    assert (train["optimizer"], train["lr"], train["epochs"], train["batch_size"]) == (
        "adam",
        1e-4,
        15,
        32,
    )
    assert train["warmup_epochs"] == 5  # linear warm-up over the first 5 of 15 epochs
    assert train["early_stopping_patience"] is None  # all 15 of them
    assert train["label_smoothing"] > 0
    assert train["spec_augment"] is True
    assert plan.config["run"]["decoding"]["beam_size"] == 3
    features = plan.config["features"]  # 32 kHz, 1024-point window, hop 640, 64 mels
    assert (features["sample_rate"], features["n_fft"], features["hop_length"]) == (
        32_000,
        1024,
        640,
    )
    assert features["n_mels"] == 64
    assert plan.recipe["changes"] == []  # the paper's sizes, nothing set: the recipe as is


def test_bilstm_runs_train_with_plateau_halving_and_the_vocabulary_threshold(
    weights_dir: Path,
) -> None:
    # the paper's BiLSTM reads pretrained embeddings (AST here); without them, see below
    plan = _plan("bilstm", "model.encoder=ast", "model.encoder_weights=ast.pth")
    train = _train(plan)
    assert (train["lr"], train["batch_size"], train["label_smoothing"]) == (1e-4, 32, 0.0)
    # lr halved after 3 epochs without validation-BLEU gain
    assert (train["plateau_patience"], train["plateau_factor"]) == (3, 0.5)
    assert train["plateau_metric"] == "BLEU-4"
    # SpecAugment: time masks <= 192 frames, frequency masks <= 48 bins, p = 0.4
    assert (train["spec_augment"], train["spec_time_mask"], train["spec_freq_mask"]) == (
        True,
        192,
        48,
    )
    assert train["spec_p"] == 0.4
    # words seen >= 10 times, at most 20 tokens
    assert plan.config["run"]["vocab"] == {"min_count": 10, "max_length": 20}
    assert plan.config["run"]["decoding"]["beam_size"] == 3


@pytest.mark.parametrize("model", ["lstm", "tempatt", "topdown"])
def test_audiocaps_models_train_with_adam_and_no_smoothing(model: str) -> None:
    train = _train(_plan(model))
    assert train["optimizer"] == "adam"
    assert (tuple(train["betas"]), train["eps"]) == ((0.9, 0.999), 1e-8)
    assert train["label_smoothing"] == 0.0


def test_maac_runs_train_in_the_papers_stages(weights_dir: Path) -> None:
    plan = _plan("maac", "model.backbone=resnet38", "model.backbone_weights=resnet38.pth")
    train = _train(plan)
    # keyword encoder: backbone frozen at 1e-3 for 80 epochs, then all of it at 5e-4 for 25
    assert (train["pretrain_frozen_epochs"], train["pretrain_frozen_lr"]) == (80, 1e-3)
    assert (train["pretrain_epochs"], train["pretrain_lr"]) == (25, 5e-4)
    assert train["pretrain_mixup_alpha"] > 0  # mixup in keyword pre-training
    assert train["pretrain_spec_augment_pp"] != "off"  # SpecAugment++
    assert train["spec_augment"] is True  # and SpecAugment
    # cross-entropy 30 epochs at 3e-4, x 0.98 per epoch
    assert (train["epochs"], train["lr"], train["lr_decay_per_epoch"]) == (30, 3e-4, 0.98)
    assert train["early_stopping_patience"] is None  # all 30, so SCST starts at the 30th
    # SCST 55 epochs at 5e-5 from the 30th CE epoch
    assert (train["scst_epochs"], train["scst_lr"], train["scst_from"]) == (55, 5e-5, "last")
    assert plan.config["run"]["decoding"]["beam_size"] == 4
    features = plan.config["features"]  # PANNs' front end, the ResNet38's
    assert (features["sample_rate"], features["hop_length"], features["log"]) == (
        32_000,
        320,
        "db",
    )
    assert plan.config["run"]["model"]["backbone_weights"] == str(weights_dir / "resnet38.pth")
    # the backbone settings complete the recipe: the run differs from it in nothing
    assert plan.recipe["changes"] == []


def test_a_maac_backbone_without_weights_skips_the_frozen_epochs_and_says_why() -> None:
    plan = _plan("maac")
    assert _train(plan)["pretrain_frozen_epochs"] == 0
    assert _changes(plan)["train.pretrain_frozen_epochs"] == (80, 0, "adapted")
    reason = next(c["reason"] for c in plan.recipe["changes"] if c["why"] == "adapted")
    assert "no pretrained weights" in reason


def test_a_bilstm_over_filterbanks_trains_at_1e_3_and_says_why() -> None:
    plan = _plan("bilstm")
    assert _train(plan)["lr"] == 1e-3
    assert _changes(plan)["train.lr"] == (1e-4, 1e-3, "adapted")
    reason = next(c["reason"] for c in plan.recipe["changes"] if c["why"] == "adapted")
    assert "no pretrained audio-event embeddings" in reason


def test_a_bilstm_rate_set_for_the_run_is_kept() -> None:
    plan = _plan("bilstm", "train.lr=2e-4")
    assert _train(plan)["lr"] == 2e-4
    assert _changes(plan)["train.lr"] == (1e-4, 2e-4, "set")


def test_frozen_epochs_set_for_the_run_are_kept() -> None:
    plan = _plan("maac", "train.pretrain_frozen_epochs=2")
    assert _train(plan)["pretrain_frozen_epochs"] == 2
    assert _changes(plan)["train.pretrain_frozen_epochs"] == (80, 2, "set")


def test_the_av_captioner_pretrains_with_mbp_and_fine_tunes_at_1e_5() -> None:
    plan = _plan("crossmodal")
    train = _train(plan)
    model = plan.config["run"]["model"]
    assert (model["mbp"], model["mbp_beta"], model["mbp_alpha"]) == (True, 0.99, 10.0)
    assert train["pretrain_epochs"] > 0  # MBP only there
    assert train["lr"] == 1e-5  # fine-tuning
    assert (train["lr_schedule"], train["warmup_fraction"]) == ("linear_decay", 0.1)
    assert train["early_stopping_patience"] is None  # the decay runs to its end
    assert plan.config["run"]["decoding"]["beam_size"] == 5
    features = plan.config["features"]  # its own: 22,050 Hz, 1536-sample frames, hop 588
    assert (features["sample_rate"], features["n_fft"], features["hop_length"]) == (
        22_050,
        1536,
        588,
    )


def test_every_model_has_a_recorded_recipe() -> None:
    for model in MODELS:
        record = _plan(model).recipe
        assert record["model"] == model
        assert record["paper"]
        assert record["summary"]


# pretrained front ends ---------------------------------------------------------------------


@pytest.mark.parametrize("encoder", ["panns", "panns_resnet38"])
def test_a_panns_encoder_reads_panns_features(weights_dir: Path, encoder: str) -> None:
    plan = _plan("tempatt", f"model.encoder={encoder}", "model.encoder_weights=cnn14.pth")
    features = plan.config["features"]
    # 32 kHz, hop 320, Slaney mels 50-14,000 Hz in dB
    assert (features["sample_rate"], features["hop_length"]) == (32_000, 320)
    assert (features["mel_scale"], features["mel_norm"]) == ("slaney", "slaney")
    assert (features["f_min"], features["f_max"], features["log"]) == (50.0, 14_000.0, "db")
    assert _changes(plan)["features"] == ("act", "panns", "adapted")


def test_an_ast_encoder_gives_its_cls_output_by_default(weights_dir: Path) -> None:
    plan = _plan("bilstm", "model.encoder=ast", "model.encoder_weights=ast.pth")
    assert plan.config["run"]["model"]["encoder_options"] == {"output": "cls"}
    assert plan.config["features"]["kind"] == "fbank"  # AST's Kaldi fbank
    chosen = _plan(
        "bilstm",
        "model.encoder=ast",
        "model.encoder_weights=ast.pth",
        'model.encoder_options={"output": "frames"}',
    )
    assert chosen.config["run"]["model"]["encoder_options"] == {"output": "frames"}


def test_word_vectors_are_named_in_the_weights_folder(weights_dir: Path) -> None:
    plan = _plan("topdown", "model.word_vectors=cc.en.300.vec")
    assert plan.config["run"]["model"]["word_vectors"] == str(weights_dir / "cc.en.300.vec")
    with pytest.raises(ValidationError, match=r"model\.word_vectors: /etc/passwd is not in"):
        _plan("topdown", "model.word_vectors=/etc/passwd")


# scaled, set, adapted ------------------------------------------------------------------------


def test_a_smaller_model_is_recorded_as_scaled_down() -> None:
    plan = _plan("act", preset="small")
    assert plan.recipe["changes"] == [
        {
            "setting": "model size",
            "recipe": "paper",
            "run": "small",
            "why": "scaled",
            "reason": "the small preset's layer sizes, not the paper's",
        }
    ]


def test_epochs_scale_every_stage_of_the_recipe_and_are_recorded() -> None:
    plan = _plan("maac", epochs=3)
    train = _train(plan)
    assert (train["pretrain_epochs"], train["epochs"], train["scst_epochs"]) == (2, 3, 6)
    changes = _changes(plan)
    assert changes["train.epochs"] == (30, 3, "scaled")
    assert changes["train.pretrain_epochs"] == (25, 2, "scaled")
    assert changes["train.scst_epochs"] == (55, 6, "scaled")
    scaled = next(c for c in plan.recipe["changes"] if c["setting"] == "train.epochs")
    assert scaled["reason"] == "the recipe scaled to 3 caption epochs"


def test_settings_win_over_the_recipe_and_are_recorded_as_set() -> None:
    plan = _plan("act", "train.lr=3e-4", "decoding.beam_size=5", "features.n_mels=32", epochs=3)
    assert _train(plan)["lr"] == 3e-4
    changes = _changes(plan)
    assert changes["train.lr"] == (1e-4, 3e-4, "set")
    assert changes["decoding.beam_size"] == (3, 5, "set")
    assert changes["features.n_mels"] == (64, "32", "set")
    assert changes["train.warmup_epochs"] == (5.0, 1.0, "scaled")


def test_a_setting_that_overrides_a_scaled_one_is_recorded_as_set() -> None:
    changes = _changes(_plan("act", "train.epochs=2", epochs=3))
    assert changes["train.epochs"] == (15, 2, "set")


def test_a_plateau_figure_the_validation_cannot_give_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"train\.plateau_metric='SPIDEr-max' is not one of"):
        _plan("bilstm", "train.plateau_metric=SPIDEr-max")


def test_mbp_without_pretraining_is_refused_before_the_run_starts() -> None:
    with pytest.raises(ValidationError, match="MBP is a pre-training loss"):
        _plan("crossmodal", "train.pretrain_epochs=0")


def test_a_bad_beam_width_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"'decoding\.beam_size': must be between 1 and 10"):
        _plan("act", "decoding.beam_size=0")


# what runs read -----------------------------------------------------------------------------


def test_the_vocabulary_keeps_only_words_the_recipe_counts_often_enough() -> None:
    plan = _plan("bilstm")  # words seen >= 10 times
    texts = ["a dog barks"] * 10 + ["a cat meows"] * 9 + ["a bird sings " + "x " * 30]
    clip = datasets.ClipCaptions(clip_id=1, texts=texts, labels=[], audio="")
    data = datasets.RunData(
        run_config=run_config_from_dict(plan.config["run"]),
        feature_config=None,  # type: ignore[arg-type]  # the vocabulary reads text only
        video_config=None,
        splits={"train": datasets.SplitData(clips=[clip])},
        dropped_clips={},
        video_counts={},
    )
    vocab = data.build_vocabulary()
    # "a" 20 times, "x" 17 (a caption counts up to its 20th word), "dog" and "barks" 10;
    # "cat" and "meows" 9, "bird" and "sings" once
    assert vocab.words[len(SPECIALS) :] == ["a", "x", "barks", "dog"]
    assert vocab.max_length == 20


# recipes named by source ------------------------------------------------------------------


def test_maac_code_trains_as_the_released_code_does(weights_dir: Path) -> None:
    plan = _plan(
        "maac",
        "model.backbone=resnet38",
        "model.backbone_weights=resnet38.pth",
        recipe="maac-code",
    )
    train = _train(plan)
    # keyword pre-training: batch 64 with the backbone frozen, then 16 (Tag_train.py)
    assert (train["pretrain_frozen_epochs"], train["pretrain_frozen_batch_size"]) == (80, 64)
    assert (train["pretrain_epochs"], train["pretrain_batch_size"]) == (25, 16)
    # captions: clip 2.5, Adam weight decay 1e-6 (amsgrad), scheduled sampling to 0.3
    assert (train["epochs"], train["lr"], train["batch_size"]) == (30, 3e-4, 32)
    assert (train["grad_clip"], train["weight_decay"], train["amsgrad"]) == (2.5, 1e-6, True)
    assert train["scheduled_sampling"] == 0.3
    # SpecAugment p 0.2, time < 30, frequency < 15
    assert (train["spec_p"], train["spec_time_mask"], train["spec_freq_mask"]) == (0.2, 29, 14)
    # the 15-epoch whole-model fine-tune at 2e-5, batch 8, then SCST 10 epochs at 1e-6
    assert (train["finetune_epochs"], train["finetune_lr"], train["finetune_batch_size"]) == (
        15,
        2e-5,
        8,
    )
    assert (train["scst_epochs"], train["scst_lr"]) == (10, 1e-6)
    decoding = plan.config["run"]["decoding"]
    assert (decoding["beam_size"], decoding["length_penalty"]) == (4, 1.15)
    assert plan.recipe["name"] == "maac-code"
    assert "released code" in plan.recipe["paper"]
    assert plan.recipe["changes"] == []


def test_the_maac_paper_recipe_keeps_plain_teacher_forcing_and_mean_ranking() -> None:
    plan = _plan("maac")
    train = _train(plan)
    assert (train["scheduled_sampling"], train["finetune_epochs"]) == (0.0, 0)
    assert plan.config["run"]["decoding"]["length_penalty"] == 1.0
    assert plan.recipe["name"] == "maac"


@pytest.mark.parametrize(
    ("model", "recipe", "epochs", "milestones"),
    [("act", "act-code", 30, (15, 25)), ("vact_concat", "vact-code", 15, (15,))],
)
def test_act_code_recipes_train_as_the_released_configs(
    model: str, recipe: str, epochs: int, milestones: tuple[int, ...]
) -> None:
    train = _train(_plan(model, recipe=recipe))
    assert (train["epochs"], train["lr"], train["batch_size"]) == (epochs, 1e-4, 32)
    assert (train["warmup_epochs"], train["warmup_per_epoch"]) == (5.0, True)
    assert (train["lr_milestones"], train["lr_milestone_factor"]) == (milestones, 0.1)
    assert (train["weight_decay"], train["grad_clip"]) == (1e-6, 2.0)


def test_a_recipe_of_another_model_is_refused_naming_the_models_recipes() -> None:
    with pytest.raises(ValidationError, match=r"recipe 'maac-code' trains maac, not 'act'"):
        _plan("act", recipe="maac-code")
    with pytest.raises(ValidationError, match=r"no recipe 'maac-cod'.*maac, maac-code"):
        _plan("maac", recipe="maac-cod")


def test_a_code_recipe_scaled_down_scales_its_fine_tune_and_milestones() -> None:
    maac = _train(_plan("maac", recipe="maac-code", epochs=3))
    assert (maac["finetune_epochs"], maac["scst_epochs"]) == (2, 1)
    act = _train(_plan("act", recipe="act-code", epochs=6))
    assert act["lr_milestones"] == (3, 5)
