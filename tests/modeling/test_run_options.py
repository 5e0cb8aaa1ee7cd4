"""SpecAugment and pretrained encoders switched on from a run config (tiny models, CPU)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.config import (
    ConfigError,
    RunConfig,
    TopDownConfig,
    apply_overrides,
    check_train_config,
)
from modeling.ml.data import CaptionItem, collate
from modeling.ml.encoders import FrozenEncoder, pretrained_architecture
from modeling.ml.models.encoded import EncodedCaptioner
from modeling.ml.models.tempatt import TempAttCaptioner
from modeling.ml.presets import model_preset, train_preset
from modeling.ml.registry import build_model, run_config_from_dict
from modeling.ml.trainer import Trainer, train
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    CAPTIONS,
    items,
    one_torch_thread,  # noqa: F401
    vocabulary,
)

# a VGGish with torchvggish's parameter names and tiny shapes: 16 bins, 16-frame patches
MELS = 16
VGGISH = {"channels": [4, 4, 8, 8, 8, 8], "hidden": 16, "embedding_dim": 8, "patch_frames": 16}


def _run(name: str = "lstm", *overrides: str, **train_changes: Any) -> RunConfig:
    config = dataclasses.replace(train_preset("tiny"), **train_changes)
    run = RunConfig(model_name=name, model=model_preset(name, "tiny"), train=config)
    return apply_overrides(run, list(overrides))


def _mel_items(seed: int = 0) -> list[CaptionItem]:
    """Six clips of 16-bin frames, 20..45 frames long (one to three VGGish patches)."""
    vocab = vocabulary()
    gen = torch.Generator().manual_seed(seed)
    return [
        CaptionItem(
            features=torch.randn(20 + 5 * i, MELS, generator=gen),
            tokens=vocab.encode(caption),
            clip_id=f"clip{i}",
        )
        for i, caption in enumerate(CAPTIONS)
    ]


def _weights(tmp_path: Path, seed: int = 1) -> Path:
    """A state_dict saved from the adapter's own architecture, as a user's converted file."""
    torch.manual_seed(seed)
    path = tmp_path / "vggish-tiny.pt"
    torch.save(pretrained_architecture("vggish", MELS, VGGISH).state_dict(), path)
    return path


def _encoder_run(weights: Path, *extra: str) -> RunConfig:
    return _run(
        "tempatt",
        "model.encoder=vggish",
        f"model.encoder_weights={weights}",
        f"model.encoder_options={json.dumps(VGGISH)}",
        f"model.feature_dim={MELS}",
        *extra,
    )


class _Inputs:
    """Records the features every forward() of a model receives."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.seen: list[torch.Tensor] = []
        model.register_forward_pre_hook(lambda _m, args: self.seen.append(args[0]["features"]))


# SpecAugment ------------------------------------------------------------------------------


def _trainer(tmp_path: Path, run: RunConfig) -> Trainer:
    vocab = vocabulary()
    examples = items(vocab)
    model = build_model(run.model_name, run.model, vocab_size=len(vocab))
    return Trainer(
        model,
        model_name=run.model_name,
        config=run.train,
        vocab=vocab,
        train_items=examples,
        val_items=examples,
        out_dir=tmp_path,
        run_config=run,
    )


def test_spec_augment_changes_training_inputs_but_not_validation(tmp_path: Path) -> None:
    run = _run("lstm", "train.spec_augment=true", "train.spec_time_mask=3", "train.batch_size=8")
    trainer = _trainer(tmp_path, run)
    inputs = _Inputs(trainer.model)
    batch = collate(items(vocabulary()))

    trainer.model.train()
    trainer._train_step(trainer.stage_of(0), batch, [])
    trained_on = inputs.seen.pop()
    assert not torch.equal(trained_on, batch["features"])
    changed = trained_on != batch["features"]
    lengths = batch["feature_lengths"]
    padding = torch.arange(batch["features"].shape[1])[None, :] >= lengths[:, None]
    assert changed.any(dim=(1, 2)).all()  # spec_p=1: every clip is masked
    assert not changed[padding].any()  # padding stays zero

    trainer.validation_loss()
    assert len(inputs.seen) == 1
    assert torch.equal(inputs.seen[0], batch["features"])


def test_without_spec_augment_training_inputs_are_the_batch(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, _run("lstm", "train.batch_size=8"))
    inputs = _Inputs(trainer.model)
    batch = collate(items(vocabulary()))
    trainer._train_step(trainer.stage_of(0), batch, [])
    assert torch.equal(inputs.seen[0], batch["features"])


def test_spec_augment_settings_are_recorded_in_the_checkpoint(tmp_path: Path) -> None:
    run = _run("lstm", "train.spec_augment=on", "train.spec_freq_mask=2", epochs=1)
    vocab = vocabulary()
    result = train(run=run, vocab=vocab, train_items=items(vocab), out_dir=tmp_path)
    stored = load_checkpoint(result.last_checkpoint).run_config
    assert stored is not None
    rebuilt = run_config_from_dict(stored)
    assert rebuilt.train.spec_augment is True
    assert rebuilt.train.spec_freq_mask == 2


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.spec_p=1.5", "train.spec_p"),
        ("train.spec_time_mask=-1", "train.spec_time_mask"),
    ],
)
def test_bad_spec_augment_settings_are_refused(override: str, message: str) -> None:
    run = _run("lstm", "train.spec_augment=true", override)
    with pytest.raises(ConfigError, match=message):
        check_train_config(run.train)


def test_bad_config_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"'model\.encoder': 'wav2vec' is not one of"):
        _run("lstm", "model.encoder=wav2vec")
    with pytest.raises(ConfigError, match=r"train\.spec_augment"):
        _run("lstm", "train.spec_augment=maybe")
    with pytest.raises(ConfigError, match=r"model\.encoder_options': not a JSON object"):
        _run("lstm", "model.encoder_options={output: fc2}")


# Pretrained encoders ----------------------------------------------------------------------


def test_a_run_with_a_pretrained_encoder_trains_and_keeps_its_weights_fixed(
    tmp_path: Path,
) -> None:
    weights = _weights(tmp_path)
    run = _encoder_run(weights, "train.spec_augment=true", "train.spec_time_mask=4")
    vocab = vocabulary()
    result = train(run=run, vocab=vocab, train_items=_mel_items(), out_dir=tmp_path / "run")
    assert result.steps == 2 * 2
    assert result.stopped == "completed"

    checkpoint = load_checkpoint(result.last_checkpoint)
    model = checkpoint.model
    assert isinstance(model, EncodedCaptioner)
    assert isinstance(model.audio_encoder, FrozenEncoder)
    assert model.captioner.config.feature_dim == 8  # VGGish's embedding size
    assert checkpoint.run_config is not None
    assert checkpoint.run_config["model"]["encoder"] == "vggish"
    # frozen: the encoder still holds the file's weights; the captioner learned
    loaded = torch.load(weights, weights_only=True)
    for key, value in model.audio_encoder.encoder.state_dict().items():
        assert torch.equal(value, loaded[key]), key
    fresh = build_model("tempatt", run.model, vocab_size=len(vocab))
    assert isinstance(fresh, EncodedCaptioner)
    assert isinstance(fresh.captioner, TempAttCaptioner)
    assert isinstance(model.captioner, TempAttCaptioner)
    assert not torch.equal(fresh.captioner.decoder.out.weight, model.captioner.decoder.out.weight)


def test_an_unfrozen_encoder_is_fine_tuned(tmp_path: Path) -> None:
    weights = _weights(tmp_path)
    run = _encoder_run(weights, "model.encoder_freeze=false")
    vocab = vocabulary()
    result = train(run=run, vocab=vocab, train_items=_mel_items(), out_dir=tmp_path / "run")
    model = load_checkpoint(result.last_checkpoint).model
    assert isinstance(model, EncodedCaptioner)
    loaded = torch.load(weights, weights_only=True)
    trained = model.audio_encoder.state_dict()
    assert not torch.equal(trained["embeddings.4.weight"], loaded["embeddings.4.weight"])


def test_the_checkpoint_rebuilds_the_encoder_without_its_weights_file(tmp_path: Path) -> None:
    weights = _weights(tmp_path)
    vocab = vocabulary()
    result = train(
        run=_encoder_run(weights),
        vocab=vocab,
        train_items=_mel_items(),
        out_dir=tmp_path / "run",
    )
    first = load_checkpoint(result.last_checkpoint).model.eval()
    weights.unlink()  # inference reads the encoder from the checkpoint, never the file
    second = load_checkpoint(result.last_checkpoint).model.eval()
    batch = collate(_mel_items(seed=3))
    with torch.no_grad():
        assert torch.equal(first(batch), second(batch))
        memory = second.encode(batch)
    assert memory["keys"].shape[:2] == (6, 2)  # 20..45 frames: 1..2 whole patches of 16


def test_a_missing_weights_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "vggish.pt"
    vocab = vocabulary()
    with pytest.raises(FileNotFoundError, match=str(missing)):
        train(
            run=_encoder_run(missing),
            vocab=vocab,
            train_items=_mel_items(),
            out_dir=tmp_path / "run",
        )


def test_a_weights_file_of_another_shape_is_refused_by_name(tmp_path: Path) -> None:
    weights = _weights(tmp_path)
    run = _encoder_run(weights, 'model.encoder_options={"hidden": 32, "patch_frames": 16}')
    with pytest.raises(ValueError, match="does not fit encoder 'vggish'"):
        train(run=run, vocab=vocabulary(), train_items=_mel_items(), out_dir=tmp_path / "run")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.encoder=vggish"], "needs model.encoder_weights"),
        (["model.encoder_weights=x.pt"], "need model.encoder set"),
        (
            [
                "model.encoder=panns",
                "model.encoder_weights=x.pt",
                'model.encoder_options={"depth": 3}',
            ],
            "no option",
        ),
    ],
)
def test_inconsistent_encoder_settings_are_refused(overrides: list[str], message: str) -> None:
    run = _run("lstm", *overrides)
    with pytest.raises(ConfigError, match=message):
        build_model("lstm", run.model, vocab_size=len(vocabulary()))


def test_retrieval_cannot_take_an_encoder() -> None:
    run = _run("nn", "model.encoder=vggish", "model.encoder_weights=x.pt")
    with pytest.raises(ConfigError, match="model 'nn' cannot use a pretrained encoder"):
        build_model("nn", run.model, vocab_size=len(vocabulary()))


# TopDown's two levels ----------------------------------------------------------------------


def test_topdown_behind_vggish_reads_fc2_as_its_high_and_conv4_as_its_mid_level(
    tmp_path: Path,
) -> None:
    weights = _weights(tmp_path)
    run = _run(
        "topdown",
        "model.aligned_attention=false",
        "model.encoder=vggish",
        f"model.encoder_weights={weights}",
        f"model.encoder_options={json.dumps(VGGISH)}",
        f"model.feature_dim={MELS}",
    )
    model = build_model("topdown", run.model, vocab_size=len(vocabulary()))
    assert isinstance(model, EncodedCaptioner)
    model.load_encoder_weights()
    model.eval()
    # fc2 is VGGish's hidden width (16), conv4 its last channel count (8)
    inner = model.captioner.config
    assert isinstance(inner, TopDownConfig)
    assert (inner.feature_dim, inner.mid_feature_dim) == (16, 8)
    seen: list[dict[str, torch.Tensor]] = []
    model.captioner.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    batch = collate(_mel_items())
    with torch.no_grad():
        model(batch)
    fc2, conv4 = (
        pretrained_architecture("vggish", MELS, {**VGGISH, "output": output})
        for output in ("fc2", "conv4")
    )
    loaded = torch.load(weights, weights_only=True)
    fc2.load_state_dict(loaded)
    conv4.load_state_dict(loaded)
    with torch.no_grad():
        high, high_lengths = fc2.eval()(batch["features"], batch["feature_lengths"])
        mid, mid_lengths = conv4.eval()(batch["features"], batch["feature_lengths"])
    torch.testing.assert_close(seen[0]["features"], high)
    torch.testing.assert_close(seen[0]["mid_features"], mid)
    assert torch.equal(seen[0]["feature_lengths"], high_lengths)
    assert torch.equal(seen[0]["mid_feature_lengths"], mid_lengths)
    assert (high.shape[2], mid.shape[2]) == (16, 8)


def test_topdown_behind_vggish_trains_and_rebuilds_from_its_checkpoint(tmp_path: Path) -> None:
    weights = _weights(tmp_path)
    run = _run(
        "topdown",
        "model.encoder=vggish",
        f"model.encoder_weights={weights}",
        f"model.encoder_options={json.dumps(VGGISH)}",
        f"model.feature_dim={MELS}",
        epochs=1,
    )
    vocab = vocabulary()
    examples = [
        dataclasses.replace(item, attributes=[5, 6]) for item in _mel_items()
    ]  # attribute words for the aligned attention
    result = train(run=run, vocab=vocab, train_items=examples, out_dir=tmp_path / "run")
    model = load_checkpoint(result.last_checkpoint).model
    assert isinstance(model, EncodedCaptioner)
    assert model.two_levels


def test_a_model_reading_one_level_gets_the_encoders_own_output(tmp_path: Path) -> None:
    run = _encoder_run(_weights(tmp_path))  # TempAtt reads one level
    model = build_model("tempatt", run.model, vocab_size=len(vocabulary()))
    assert isinstance(model, EncodedCaptioner)
    assert not model.two_levels
    assert model.captioner.config.feature_dim == 8  # VGGish's embedding
