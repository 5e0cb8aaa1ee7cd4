"""The trainer's optional stages and hooks: a model's own pre-training (MAAC's keyword
encoder, its backbone frozen first, with mixup and SpecAugment++; the AV captioner's MBP), and
self-critical fine-tuning after caption training (from its best or its last weights)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.config import RunConfig
from modeling.ml.config_av import AVConfig
from modeling.ml.data import CaptionItem
from modeling.ml.models.maac import MAACCaptioner
from modeling.ml.presets import model_preset, train_preset
from modeling.ml.registry import build_model
from modeling.ml.runtime import seed_everything
from modeling.ml.trainer import Trainer, train
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


def test_the_av_captioner_pretrains_with_mbp_then_fine_tunes_without_it(tmp_path):
    run = _run("crossmodal", pretrain_epochs=2, pretrain_lr=1e-3, epochs=1, lr=1e-5)
    assert isinstance(run.model, AVConfig)
    run.model.mbp = True
    seen: dict[str, list] = {}
    result = _train(tmp_path, run, callbacks=_recorder(seen))

    assert [row["stage"] for row in result.history] == ["pretrain", "pretrain", "caption"]
    pretraining = [info for info in seen["step"] if info["stage"] == "pretrain"]
    fine_tuning = [info for info in seen["step"] if info["stage"] == "caption"]
    # pre-training reads every caption (6 in batches of 4), as fine-tuning does
    assert len(pretraining) == 2 * 2
    assert len(fine_tuning) == 2
    figures = [info["figures"] for info in pretraining]
    assert all(
        {"weight_audio", "weight_video", "loss_audio", "loss_video"} <= set(f) for f in figures
    )
    assert all(f["weight_audio"] + f["weight_video"] == pytest.approx(1.0) for f in figures)
    assert figures[-1]["weight_audio"] != figures[0]["weight_audio"]  # eq. 5 moved them
    # the logged loss is L + w_a L_a + w_v L_v, above the joint loss alone
    assert all(info["loss"] > info["figures"]["loss_joint"] for info in pretraining)
    # fine-tuning: the plain caption loss, at its own rate
    assert all(info["figures"] == {} for info in fine_tuning)
    assert {info["lr"] for info in pretraining} == {1e-3}
    assert {info["lr"] for info in fine_tuning} == {1e-5}


def test_mbp_without_a_pretraining_stage_is_refused(tmp_path):
    run = _run("crossmodal", epochs=1)
    assert isinstance(run.model, AVConfig)
    run.model.mbp = True
    with pytest.raises(ValueError, match=r"'model\.mbp': MBP is a pre-training loss"):
        _train(tmp_path, run)


def test_without_a_pretraining_stage_the_step_has_no_figures(tmp_path):
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


def _maac_weights(result) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(backbone, heads) of the keyword encoder in a run's last checkpoint."""
    state = load_checkpoint(result.last_checkpoint).model.state_dict()
    backbone = {k: v for k, v in state.items() if k.startswith("keyword_encoder.backbone.")}
    heads = {
        k: v
        for k, v in state.items()
        if k.startswith("keyword_encoder.") and k not in backbone and "running" not in k
    }
    return backbone, heads


def test_frozen_backbone_pretraining_trains_only_the_keyword_heads_then_everything(tmp_path):
    run = _run(
        "maac",
        pretrain_frozen_epochs=1,
        pretrain_frozen_lr=1e-2,
        pretrain_epochs=1,
        pretrain_lr=1e-3,
        epochs=1,
    )
    seen: dict[str, list] = {}
    # the first run stops after its frozen epoch (2 steps, then the epoch-end poll)
    stops = iter(range(100))
    frozen = _train(tmp_path / "frozen", run, cancel=lambda: next(stops) >= 3)
    whole = _train(tmp_path / "whole", run, callbacks=_recorder(seen))
    torch.manual_seed(run.train.seed)
    fresh = build_model("maac", run.model, vocab_size=len(vocabulary())).state_dict()

    backbone, heads = _maac_weights(frozen)
    convolutions = [k for k in backbone if k.endswith(".weight")]
    assert convolutions
    assert all(torch.equal(backbone[k], fresh[k]) for k in convolutions)  # kept fixed
    assert any(not torch.equal(heads[k], fresh[k]) for k in heads)  # the heads learned
    backbone, _ = _maac_weights(whole)
    assert any(not torch.equal(backbone[k], fresh[k]) for k in convolutions)  # then it trains
    assert [row["stage"] for row in whole.history] == ["pretrain_frozen", "pretrain", "caption"]
    rates = {info["stage"]: info["lr"] for info in seen["step"]}
    assert rates == {"pretrain_frozen": 1e-2, "pretrain": 1e-3, "caption": run.train.lr}


def test_a_frozen_backbone_stage_needs_a_model_with_a_backbone(tmp_path):
    with pytest.raises(ValueError, match="'lstm' has no backbone to keep frozen"):
        _train(tmp_path, _run("lstm", pretrain_frozen_epochs=1))


def _pretraining_inputs(tmp_path, **train_changes) -> tuple[list, list]:
    """(batches the keyword loss saw in pre-training, the clips' own features and targets)."""
    run = _run("maac", pretrain_epochs=1, epochs=1, batch_size=6, **train_changes)
    vocab = vocabulary()
    examples = _av_items(vocab)
    seen: list = []
    seed_everything(run.train.seed)
    model = build_model("maac", run.model, vocab_size=len(vocab))
    assert isinstance(model, MAACCaptioner)
    keyword_loss = model.keyword_loss

    def recording(batch):
        seen.append({k: v.clone() for k, v in batch.items()})
        return keyword_loss(batch)

    model.keyword_loss = recording  # type: ignore[method-assign]
    Trainer(
        model,
        model_name="maac",
        config=run.train,
        vocab=vocab,
        train_items=examples,
        out_dir=tmp_path,
        run_config=run,
    ).fit()
    return seen, examples


def test_mixup_mixes_pretraining_features_and_keyword_targets_alike(tmp_path):
    seen, examples = _pretraining_inputs(tmp_path, pretrain_mixup_alpha=1.0)
    assert len(seen) == 1  # pre-training only; caption training never calls the keyword loss
    batch = seen[0]
    clips = {int(item.clip_id.removeprefix("clip")): item for item in examples}
    own_targets = torch.stack([clips[i].keyword_targets for i in range(6)])
    mixed_rows = 0
    for row in range(6):
        # some pair of clips and one lambda give both the features and the targets
        fits = []
        for i in range(6):
            for j in range(6):
                fi, fj = clips[i].features, clips[j].features
                frames = max(fi.size(0), fj.size(0))
                pi = torch.nn.functional.pad(fi, (0, 0, 0, frames - fi.size(0)))
                pj = torch.nn.functional.pad(fj, (0, 0, 0, frames - fj.size(0)))
                got = batch["features"][row, :frames]
                diff = (pi - pj).flatten()
                if i == j or not diff.any():
                    continue
                lam = float(((got - pj).flatten() @ diff) / (diff @ diff))
                if torch.allclose(got, lam * pi + (1 - lam) * pj, atol=1e-5) and torch.allclose(
                    batch["keyword_targets"][row],
                    lam * own_targets[i] + (1 - lam) * own_targets[j],
                    atol=1e-5,
                ):
                    fits.append((i, j, lam))
        assert fits or any(torch.equal(batch["keyword_targets"][row], t) for t in own_targets), (
            f"row {row} is neither a clip nor a mixture of two"
        )
        assert all(-1e-6 <= lam <= 1 + 1e-6 for _, _, lam in fits), fits
        mixed_rows += any(1e-3 < lam < 1 - 1e-3 for _, _, lam in fits)
    assert mixed_rows >= 3


def test_spec_augment_pp_mixes_stripes_of_another_clip_in_pretraining(tmp_path):
    seen, examples = _pretraining_inputs(
        tmp_path,
        pretrain_spec_augment_pp="mixture",
        spec_pp_time_mask=4,
        spec_pp_time_masks=1,
        spec_pp_freq_mask=2,
        spec_pp_freq_masks=1,
    )
    batch = seen[0]
    # the clips' lengths differ, so a row's length names its clip
    originals = {item.features.size(0): item.features for item in examples}
    assert len(originals) == 6
    changed_rows = 0
    for row in range(6):
        length = int(batch["feature_lengths"][row])
        got = batch["features"][row, :length]
        own = originals[length]
        changed = got != own
        if not changed.any():
            continue
        changed_rows += 1
        # changed cells are whole time stripes or whole frequency stripes of the clip ...
        times, bins = changed.all(dim=1), changed.all(dim=0)
        assert torch.equal(changed, times[:, None] | bins[None, :])
        assert int(times.sum()) <= 4
        assert int(bins.sum()) <= 2
        # ... each the mean of the clip and one other clip there
        partners = [
            f
            for f in originals.values()
            if torch.allclose(got[changed], 0.5 * (own + _padded(f, length))[changed], atol=1e-6)
        ]
        assert partners
    assert changed_rows >= 3


def _padded(features: torch.Tensor, frames: int) -> torch.Tensor:
    out = torch.zeros(frames, features.size(1))
    out[: min(frames, features.size(0))] = features[:frames]
    return out


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


def test_scst_can_start_from_the_last_caption_epoch(tmp_path):
    vocab = vocabulary()
    run = _run("tempatt", epochs=2, scst_epochs=1, scst_lr=0.0, scst_from="last")
    scores = iter([5.0, 1.0, 0.5])
    after_captions: dict[str, torch.Tensor] = {}

    def keep(trainer, info):
        if info["stage"] == "caption" and info["epoch"] == 2:
            after_captions.update({k: v.clone() for k, v in trainer.model.state_dict().items()})

    result = _train(
        tmp_path,
        run,
        score_fn=lambda model: next(scores),
        reward_fn=_word_overlap(vocab),
        callbacks={"epoch_end": [keep]},
    )
    assert load_checkpoint(result.best_checkpoint).epoch == 1  # not where SCST started
    last = load_checkpoint(result.last_checkpoint).model.state_dict()
    best = load_checkpoint(result.best_checkpoint).model.state_dict()
    assert any(not torch.equal(last[k], best[k]) for k in best)
    for key, value in after_captions.items():
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


def test_each_stage_reads_batches_of_its_own_size(tmp_path):
    # 6 clips with one caption each: frozen pre-training in one batch of 6, then whole in
    # batches of 2 (3 steps), captions in batches of 4 (2), the fine-tune in 3s (2)
    run = _run(
        "maac",
        pretrain_frozen_epochs=1,
        pretrain_frozen_batch_size=6,
        pretrain_epochs=1,
        pretrain_batch_size=2,
        epochs=1,
        batch_size=4,
        finetune_epochs=1,
        finetune_batch_size=3,
    )
    seen: dict[str, list] = {}
    result = _train(tmp_path, run, callbacks=_recorder(seen))
    stages = [info["stage"] for info in seen["step"]]
    counts = {stage: stages.count(stage) for stage in dict.fromkeys(stages)}
    assert counts == {"pretrain_frozen": 1, "pretrain": 3, "caption": 2, "finetune": 2}
    assert seen["train_start"][0]["total_steps"] == result.steps == 8


def test_the_fine_tune_stage_trains_the_whole_model_between_captions_and_scst(tmp_path):
    vocab = vocabulary()
    run = _run(
        "maac",
        epochs=1,
        lr=1e-2,
        finetune_epochs=2,
        finetune_lr=1e-3,
        scst_epochs=1,
        scst_lr=1e-4,
    )
    encoders: dict[str, dict[str, torch.Tensor]] = {}

    def keep_encoder(trainer, row):
        encoders[f"{row['stage']}{row['epoch']}"] = {
            k: v.detach().clone() for k, v in trainer.model.keyword_encoder.state_dict().items()
        }

    seen: dict[str, list] = {}
    callbacks = {**_recorder(seen), "epoch_end": [keep_encoder]}
    torch.manual_seed(run.train.seed)
    built = build_model("maac", run.model, vocab_size=len(vocab))
    assert isinstance(built, MAACCaptioner)
    fresh = built.keyword_encoder.state_dict()
    result = _train(tmp_path, run, callbacks=callbacks, reward_fn=_word_overlap(vocab))

    assert [row["stage"] for row in result.history] == ["caption", "finetune", "finetune", "scst"]
    rates = {info["stage"]: info["lr"] for info in seen["step"]}
    assert rates == {"caption": 1e-2, "finetune": pytest.approx(1e-3 * 0.98**0), "scst": 1e-4}
    weights = [k for k in fresh if k.endswith("weight")]
    # caption training keeps the keyword encoder fixed; the fine-tune trains it
    assert all(torch.equal(encoders["caption1"][k], fresh[k]) for k in weights)
    assert any(not torch.equal(encoders["finetune3"][k], fresh[k]) for k in weights)
    # the fine-tune is validated like caption training (its best may start SCST)
    finetune = [row for row in result.history if row["stage"] == "finetune"]
    assert all(row["score"] is not None for row in finetune)


def test_the_maac_code_recipe_runs_through_the_trainer_at_tiny_sizes(tmp_path):
    from modeling.ml.presets import named_recipe, scaled_epochs

    vocab = vocabulary()
    code = scaled_epochs(named_recipe("maac", "maac-code").train_config(), 2)
    config = dataclasses.replace(
        code,
        pretrain_frozen_epochs=0,  # the tiny CNN backbone has no pretrained weights
        amp=False,
        log_every_steps=1,
        spec_time_mask=4,
        device="cpu",
    )
    run = RunConfig(model_name="maac", model=model_preset("maac", "tiny"), train=config)
    seen: dict[str, list] = {}
    result = _train(tmp_path, run, callbacks=_recorder(seen), reward_fn=_word_overlap(vocab))
    # 25 + 30 + 15 + 10 epochs scaled to 2 caption epochs: 2 + 2 + 1 + 1
    assert [row["stage"] for row in result.history] == [
        "pretrain",
        "pretrain",
        "caption",
        "caption",
        "finetune",
        "scst",
    ]
    assert result.stopped == "completed"
    caption = [info for info in seen["step"] if info["stage"] == "caption"]
    assert {info["figures"]["sampling_p"] for info in caption} == {0.15, 0.3}
