"""The trainer's optional stages and hooks: a model's own training loss and figures (MBP),
pre-training (MAAC's keyword encoder), and self-critical fine-tuning as a second stage."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.config import RunConfig
from modeling.ml.config_av import AVConfig
from modeling.ml.data import CaptionItem
from modeling.ml.presets import model_preset, train_preset
from modeling.ml.registry import build_model
from modeling.ml.trainer import train
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    items,
    one_torch_thread,  # noqa: F401
    vocabulary,
)
from tests.modeling.captioning_av import videos

N_KEYWORDS = 12  # the tiny MAAC preset's keyword vocabulary


def _run(name: str, **train_changes: Any) -> RunConfig:
    config = dataclasses.replace(train_preset("tiny"), **train_changes)
    return RunConfig(model_name=name, model=model_preset(name, "tiny"), train=config)


def _av_items(vocab) -> list[CaptionItem]:
    gen = torch.Generator().manual_seed(3)
    return [
        dataclasses.replace(
            item,
            video=clip,
            keyword_targets=(torch.rand(N_KEYWORDS, generator=gen) < 0.3).float(),
        )
        for item, clip in zip(items(vocab), videos(), strict=True)
    ]


def _train(tmp_path, run: RunConfig, **kwargs):
    vocab = vocabulary()
    examples = _av_items(vocab)
    kwargs.setdefault("val_items", examples[:2])
    return train(run=run, vocab=vocab, train_items=examples, out_dir=tmp_path, **kwargs)


def _recorder(seen: dict[str, list]):
    def record(event):
        return [lambda trainer, info: seen.setdefault(event, []).append(info)]

    return {event: record(event) for event in ("train_start", "step", "epoch_end")}


def _word_overlap(vocab):
    """A reward: the share of the clip's own caption words the candidate contains."""
    words = {item.clip_id: set(item.tokens[1:-1]) for item in _av_items(vocab)}

    def reward(captions, clip_ids):
        return [
            len(set(c) & words[k]) / max(1, len(words[k]))
            for c, k in zip(captions, clip_ids, strict=True)
        ]

    return reward


def test_a_models_training_loss_is_used_and_its_mbp_weights_are_logged(tmp_path):
    run = _run("crossmodal", epochs=2)
    assert isinstance(run.model, AVConfig)
    run.model.mbp = True
    seen: dict[str, list] = {}
    _train(tmp_path, run, callbacks=_recorder(seen))
    figures = [info["figures"] for info in seen["step"]]
    assert all(
        {"weight_audio", "weight_video", "loss_audio", "loss_video"} <= set(f) for f in figures
    )
    assert all(f["weight_audio"] + f["weight_video"] == pytest.approx(1.0) for f in figures)
    assert figures[-1]["weight_audio"] != figures[0]["weight_audio"]  # eq. 5 moved them
    # the logged loss is L + w_a L_a + w_v L_v, above the joint loss alone
    assert all(info["loss"] > info["figures"]["loss_joint"] for info in seen["step"])


def test_without_a_training_loss_the_step_has_no_figures(tmp_path):
    seen: dict[str, list] = {}
    _train(tmp_path, _run("lstm", epochs=1), callbacks=_recorder(seen))
    assert all(info["figures"] == {} and info["stage"] == "caption" for info in seen["step"])


def test_maac_pretrains_its_keyword_encoder_then_captions_then_fine_tunes_on_the_reward(
    tmp_path,
):
    vocab = vocabulary()
    seen: dict[str, list] = {}
    run = _run("maac", pretrain_epochs=3, pretrain_lr=1e-2, epochs=2, scst_epochs=2)
    result = _train(tmp_path, run, callbacks=_recorder(seen), reward_fn=_word_overlap(vocab))

    assert [row["stage"] for row in result.history] == [
        "pretrain",
        "pretrain",
        "pretrain",
        "caption",
        "caption",
        "scst",
        "scst",
    ]
    pretrain = [row for row in result.history if row["stage"] == "pretrain"]
    assert pretrain[-1]["train_loss"] < pretrain[0]["train_loss"]  # keyword BCE falls
    assert all(row["score"] is None for row in pretrain)  # nothing to caption with yet
    # the pre-training stage sees each clip once per epoch: 6 clips in batches of 4
    assert [info["stage"] for info in seen["step"]][:2] == ["pretrain", "pretrain"]
    assert seen["train_start"][0]["total_steps"] == 3 * 2 + 2 * 2 + 2 * 2
    scst = [info for info in seen["step"] if info["stage"] == "scst"]
    assert scst
    assert all({"reward", "baseline_reward"} <= set(i["figures"]) for i in scst)
    assert all(info["lr"] == pytest.approx(5e-5 * 1.0) for info in scst)
    assert result.steps == 14


def test_pretraining_changes_only_the_keyword_encoder(tmp_path):
    run = _run("maac", pretrain_epochs=1, epochs=1)
    stops = iter(range(100))
    # cancel right after the pre-training epoch (2 steps, then the epoch-end poll)
    result = _train(tmp_path, run, cancel=lambda: next(stops) >= 3)
    assert result.steps == 2
    trained = load_checkpoint(result.last_checkpoint).model.state_dict()
    torch.manual_seed(run.train.seed)
    fresh = build_model("maac", run.model, vocab_size=len(vocabulary())).state_dict()
    changed = {k for k in fresh if not torch.equal(fresh[k], trained[k])}
    assert changed
    assert all(k.startswith("keyword_encoder.") for k in changed)


def test_scst_starts_from_the_best_caption_weights(tmp_path):
    vocab = vocabulary()
    # lr 0 in SCST: the run ends with exactly the weights the stage started from
    run = _run("tempatt", epochs=2, scst_epochs=1, scst_lr=0.0)
    scores = iter([5.0, 1.0, 0.5])
    result = _train(
        tmp_path, run, score_fn=lambda model: next(scores), reward_fn=_word_overlap(vocab)
    )
    assert result.best_score == 5.0  # neither epoch 2 nor SCST beat caption epoch 1
    best = load_checkpoint(result.best_checkpoint)
    assert best.epoch == 1
    last = load_checkpoint(result.last_checkpoint).model.state_dict()
    for key, value in best.model.state_dict().items():
        torch.testing.assert_close(last[key], value, msg=key)


def test_early_stopping_in_caption_training_moves_on_to_scst(tmp_path):
    vocab = vocabulary()
    scores = iter([3.0, 2.0, 1.0, 4.0, 5.0])
    run = _run("tempatt", epochs=5, scst_epochs=2, early_stopping_patience=2)
    result = _train(
        tmp_path, run, score_fn=lambda model: next(scores), reward_fn=_word_overlap(vocab)
    )
    assert [row["stage"] for row in result.history] == ["caption"] * 3 + ["scst"] * 2
    assert [row["epoch"] for row in result.history] == [1, 2, 3, 6, 7]
    assert result.stopped == "completed"
    assert result.best_score == 5.0


def test_cancel_then_resume_in_the_scst_stage_ends_like_an_uninterrupted_run(tmp_path):
    vocab = vocabulary()
    run = _run("tempatt", epochs=1, scst_epochs=2)
    run.model.dropout = 0.3
    straight = _train(tmp_path / "straight", run, reward_fn=_word_overlap(vocab))
    polls = iter(range(100))
    cut = _train(
        tmp_path / "cut", run, reward_fn=_word_overlap(vocab), cancel=lambda: next(polls) >= 4
    )
    assert cut.stopped == "cancelled"
    assert cut.steps == 3  # mid-way through the first SCST epoch
    resumed = _train(
        tmp_path / "cut",
        run,
        reward_fn=_word_overlap(vocab),
        resume_from=cut.last_checkpoint,
    )

    def rows(result):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in result.history]

    assert rows(resumed) == rows(straight)
    final = load_checkpoint(resumed.last_checkpoint).model.state_dict()
    for key, value in load_checkpoint(straight.last_checkpoint).model.state_dict().items():
        torch.testing.assert_close(final[key], value, msg=key)


def test_pretraining_a_model_without_such_a_stage_is_refused(tmp_path):
    with pytest.raises(ValueError, match="model 'lstm' has no pre-training stage"):
        _train(tmp_path, _run("lstm", pretrain_epochs=1))


def test_scst_without_a_reward_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"train\.scst_epochs=2 needs a reward function"):
        _train(tmp_path, _run("lstm", scst_epochs=2))
