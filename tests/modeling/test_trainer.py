"""The model-agnostic training loop: results, determinism, callbacks, stopping, resume."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from modeling.ml.checkpoint import load_checkpoint, read_checkpoint
from modeling.ml.config import RunConfig
from modeling.ml.data import collate
from modeling.ml.decoding import greedy
from modeling.ml.presets import model_preset, train_preset
from modeling.ml.train_state import TrainerState
from modeling.ml.trainer import Trainer, train
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    items,
    one_torch_thread,  # noqa: F401
    tiny_model,
    vocabulary,
)


def _run(name: str = "lstm", **train_changes: Any) -> RunConfig:
    config = dataclasses.replace(train_preset("tiny"), **train_changes)
    return RunConfig(model_name=name, model=model_preset(name, "tiny"), train=config)


def _train(tmp_path, run: RunConfig, **kwargs):
    vocab = vocabulary()
    examples = items(vocab)
    kwargs.setdefault("val_items", examples[:2])
    return train(run=run, vocab=vocab, train_items=examples, out_dir=tmp_path, **kwargs)


def test_train_returns_history_and_a_loadable_best_checkpoint(tmp_path):
    result = _train(tmp_path, _run(epochs=4, lr=1e-2))
    assert result.stopped == "completed"
    assert [row["epoch"] for row in result.history] == [1, 2, 3, 4]
    assert result.steps == 4 * 2  # 6 captions in batches of 4
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert result.best_score == max(row["score"] for row in result.history)
    best = load_checkpoint(result.best_checkpoint)
    assert best.model_name == "lstm"
    assert best.best_score == result.best_score
    assert best.run_config is not None
    assert best.run_config["train"]["lr"] == 1e-2
    assert load_checkpoint(result.last_checkpoint).step == result.steps


def test_the_last_checkpoint_keeps_the_loop_state_under_its_old_keys(tmp_path):
    # checkpoints written before the state became a dataclass must still resume (new keys
    # go last; a checkpoint without them restores their defaults)
    result = _train(tmp_path, _run(epochs=1))
    saved = read_checkpoint(result.last_checkpoint)["trainer_state"]
    assert list(saved) == [
        "step",
        "epoch",
        "batch_in_epoch",
        "epoch_loss_sum",
        "epoch_loss_count",
        "best_score",
        "bad_validations",
        "plateau_bad",
        "plateau_scale",
        "stage_step",
        "history",
        "plateau_best",
        "rng",
        "python_rng",
        *(["cuda_rng"] if torch.cuda.is_available() else []),
    ]
    assert TrainerState.restore(saved) == TrainerState(
        step=result.steps,
        epoch=1,
        best_score=result.best_score,
        stage_step=result.steps,
        history=result.history,
    )


def test_the_same_seed_gives_the_same_run(tmp_path):
    one = _train(tmp_path / "a", _run(epochs=2))
    two = _train(tmp_path / "b", _run(epochs=2))
    other = _train(tmp_path / "c", _run(epochs=2, seed=1))
    losses = [row["train_loss"] for row in one.history]
    assert losses == [row["train_loss"] for row in two.history]
    assert losses != [row["train_loss"] for row in other.history]


def test_early_stopping_follows_the_supplied_score(tmp_path):
    scores = iter([3.0, 2.0, 1.0, 0.5, 0.1])
    result = _train(
        tmp_path, _run(epochs=5, early_stopping_patience=2), score_fn=lambda model: next(scores)
    )
    assert result.stopped == "early_stopping"
    assert [row["score"] for row in result.history] == [3.0, 2.0, 1.0]
    assert result.best_score == 3.0
    assert load_checkpoint(result.best_checkpoint).epoch == 1


def test_plateaus_cut_the_learning_rate(tmp_path):
    result = _train(
        tmp_path,
        _run(epochs=4, lr=1e-2, plateau_patience=2, plateau_factor=0.5),
        score_fn=lambda model: 1.0,
    )
    assert [row["lr"] for row in result.history] == pytest.approx([1e-2, 1e-2, 5e-3, 5e-3])


def test_warm_up_then_per_epoch_decay():
    vocab = vocabulary()
    config = dataclasses.replace(
        train_preset("tiny"), lr=1.0, warmup_epochs=1.0, lr_decay_per_epoch=0.5
    )
    trainer = Trainer(
        tiny_model("lstm", vocab),
        model_name="lstm",
        config=config,
        vocab=vocab,
        train_items=items(vocab),
        out_dir="unused",
    )
    assert trainer.steps_per_epoch == 2
    assert trainer.learning_rate(0, 0) == pytest.approx(0.5)
    assert trainer.learning_rate(1, 0) == pytest.approx(1.0)
    assert trainer.learning_rate(2, 1) == pytest.approx(0.5)


def _trainer(name: str = "lstm", **train_changes: Any) -> Trainer:
    vocab = vocabulary()
    config = dataclasses.replace(train_preset("tiny"), **train_changes)
    return Trainer(
        tiny_model(name, vocab),
        model_name=name,
        config=config,
        vocab=vocab,
        train_items=items(vocab),
        out_dir="unused",
    )


@pytest.mark.parametrize("amsgrad", [False, True])
def test_the_optimizer_takes_amsgrad_from_the_config(amsgrad):
    optimizer = _trainer(amsgrad=amsgrad, weight_decay=1e-6)._make_optimizer()
    assert optimizer.param_groups[0]["amsgrad"] is amsgrad
    assert optimizer.param_groups[0]["weight_decay"] == 1e-6


def test_linear_decay_after_a_warm_up_share_of_the_stage():
    # 6 captions one per batch, 2 epochs: 12 steps; warm-up over a quarter of them (3)
    trainer = _trainer(
        lr=1.0, epochs=2, batch_size=1, warmup_fraction=0.25, lr_schedule="linear_decay"
    )
    stage = trainer.stage_of(0)
    rates = [trainer.stage_learning_rate(stage, step // 6, step) for step in range(12)]
    expected = [1 / 3, 2 / 3, 1.0] + [(12 - s) / 9 for s in range(3, 12)]
    assert rates == pytest.approx(expected)


def test_every_stage_warms_up_and_decays_on_its_own_steps():
    # pre-training on captions (the AV captioner): 2 epochs of 2 steps, then 1 caption epoch
    trainer = _trainer(
        "crossmodal",
        lr=1e-2,
        pretrain_epochs=2,
        pretrain_lr=1.0,
        epochs=1,
        warmup_fraction=0.5,
        lr_schedule="linear_decay",
    )
    pretrain, caption = trainer.stages
    assert [trainer.stage_learning_rate(pretrain, s // 2, s) for s in range(4)] == pytest.approx(
        [0.5, 1.0, 1.0, 0.5]
    )
    assert [trainer.stage_learning_rate(caption, 2, s) for s in range(2)] == pytest.approx(
        [1e-2, 1e-2]
    )


def test_warm_up_is_given_in_epochs_or_as_a_share_not_both():
    with pytest.raises(ValueError, match=r"'train\.warmup_epochs' and 'train\.warmup_fraction'"):
        _trainer(warmup_epochs=1.0, warmup_fraction=0.1)


def test_plateaus_can_follow_another_validation_figure(tmp_path):
    # the score rises every epoch while BLEU-4 falls: halving follows BLEU-4 (the BiLSTM
    # paper), the best checkpoint still follows the score
    figures = iter(
        [{"score": s, "BLEU-4": b} for s, b in [(1.0, 0.5), (2.0, 0.4), (3.0, 0.3), (4.0, 0.6)]]
    )
    result = _train(
        tmp_path,
        _run(epochs=4, lr=1e-2, plateau_patience=2, plateau_metric="BLEU-4"),
        score_fn=lambda model: next(figures),
    )
    assert [row["lr"] for row in result.history] == pytest.approx([1e-2, 1e-2, 5e-3, 5e-3])
    assert [row["score"] for row in result.history] == [1.0, 2.0, 3.0, 4.0]
    assert load_checkpoint(result.best_checkpoint).epoch == 4


def test_a_plateau_figure_the_validation_lacks_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"plateau_metric='BLEU-4'.*gives only the score"):
        _train(
            tmp_path,
            _run(epochs=1, plateau_patience=2, plateau_metric="BLEU-4"),
            score_fn=lambda model: 1.0,
        )


def test_callbacks_see_every_event(tmp_path):
    seen: dict[str, list] = {}

    def record(event):
        return [lambda trainer, info: seen.setdefault(event, []).append(info)]

    events = ["train_start", "step", "validation", "epoch_end", "checkpoint", "train_end"]
    _train(
        tmp_path,
        _run(epochs=2, log_every_steps=1),
        callbacks={event: record(event) for event in events},
    )
    assert seen["train_start"][0]["total_steps"] == 4
    assert [info["step"] for info in seen["step"]] == [1, 2, 3, 4]
    assert all(info["loss"] > 0 for info in seen["step"])
    assert len(seen["validation"]) == len(seen["epoch_end"]) == 2
    assert {info["kind"] for info in seen["checkpoint"]} == {"best", "last"}
    best = max(info["score"] for info in seen["validation"])
    assert seen["train_end"] == [{"stopped": "completed", "best_score": best, "steps": 4}]


def test_last_is_saved_every_epoch_and_finally_once(tmp_path):
    saved: list[dict] = []
    _train(
        tmp_path,
        _run(epochs=3),
        callbacks={"checkpoint": [lambda trainer, info: saved.append(info)]},
    )
    last = [info["final"] for info in saved if info["kind"] == "last"]
    assert last == [False, False, False, True]  # after each epoch, then when training ends


def test_last_is_also_saved_within_epochs_when_time_is_due(tmp_path):
    saved: list[dict] = []
    _train(
        tmp_path,
        _run(epochs=1),
        callbacks={"checkpoint": [lambda trainer, info: saved.append(info)]},
        checkpoint_every_seconds=1e-9,  # due after every step
    )
    mid_epoch = [info for info in saved if info["kind"] == "last" and not info["final"]]
    assert len(mid_epoch) == 2 + 1  # two steps in the epoch, then the epoch's end


def test_an_unknown_event_is_refused():
    vocab = vocabulary()
    trainer = Trainer(
        tiny_model("lstm", vocab),
        model_name="lstm",
        config=train_preset("tiny"),
        vocab=vocab,
        train_items=items(vocab),
        out_dir="unused",
    )
    with pytest.raises(ValueError, match="unknown trainer event 'step_end'"):
        trainer.add_callback("step_end", lambda trainer, info: None)


def test_cancel_then_resume_ends_exactly_like_an_uninterrupted_run(tmp_path):
    run = _run("tempatt", epochs=2)
    run.model.dropout = 0.3  # dropout draws random numbers: the RNG state must resume too
    straight = _train(tmp_path / "straight", run)

    polls = iter(range(100))
    cancelled = _train(tmp_path / "cut", run, cancel=lambda: next(polls) >= 4)
    assert cancelled.stopped == "cancelled"
    assert cancelled.steps == 3  # mid-way through the second epoch
    resumed = _train(tmp_path / "cut", run, resume_from=cancelled.last_checkpoint)
    assert resumed.stopped == "completed"
    assert resumed.steps == straight.steps

    def rows(result):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in result.history]

    assert rows(resumed) == rows(straight)
    final = load_checkpoint(resumed.last_checkpoint).model.state_dict()
    for key, value in load_checkpoint(straight.last_checkpoint).model.state_dict().items():
        torch.testing.assert_close(final[key], value, msg=key)


def test_resuming_from_another_models_checkpoint_is_refused(tmp_path):
    done = _train(tmp_path / "lstm", _run("lstm", epochs=1))
    with pytest.raises(ValueError, match="checkpoint of model 'lstm', not 'tempatt'"):
        _train(tmp_path / "tempatt", _run("tempatt", epochs=1), resume_from=done.last_checkpoint)


def test_retrieval_training_fills_the_bank_and_validates_once(tmp_path):
    result = _train(tmp_path, _run("nn"), score_fn=lambda model: 0.7)
    assert result.steps == 0
    assert result.best_score == 0.7
    loaded = load_checkpoint(result.best_checkpoint)
    vocab = vocabulary()
    examples = items(vocab)
    captions = [vocab.decode(h.tokens) for h in greedy(loaded.model, collate(examples))]
    assert captions == [vocab.decode(item.tokens) for item in examples]


def test_asking_for_cuda_without_it_names_the_setting(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match=r"train\.device='cuda' but CUDA is not available"):
        _train(tmp_path, _run(device="cuda"))


def test_an_empty_training_set_is_refused(tmp_path):
    with pytest.raises(ValueError, match="the training set is empty"):
        train(run=_run(), vocab=vocabulary(), train_items=[], out_dir=tmp_path)


def test_warm_up_by_whole_epochs_then_cuts_at_the_milestone_epochs():
    # ACT's code: GradualWarmupScheduler(5) stepped at each epoch's start, StepLR(10, 0.1)
    # behind it: epoch e (from 1) at e/5 of the rate, a tenth from epoch 15, a hundredth
    # from 25. Scaled down here: 2 warm-up epochs, cuts from epochs 3 and 5 of 6.
    trainer = _trainer(
        lr=1.0,
        epochs=6,
        warmup_epochs=2.0,
        warmup_per_epoch=True,
        lr_milestones=(3, 5),
        lr_milestone_factor=0.1,
    )
    assert trainer.steps_per_epoch == 2
    rates = [trainer.learning_rate(step, step // 2) for step in range(12)]
    per_epoch = [0.5, 1.0, 0.1, 0.1, 0.01, 0.01]
    assert rates == pytest.approx([rate for rate in per_epoch for _ in range(2)])
