"""Self-describing checkpoints: rebuilt from the file alone, strictly."""

from __future__ import annotations

import pytest
import torch

from modeling.ml.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from modeling.ml.config import RunConfig, TrainConfig
from modeling.ml.decoding import beam_search
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    NEURAL,
    batch,
    one_torch_thread,  # noqa: F401
    tiny_model,
    vocabulary,
)

FEATURES = {"kind": "logmel", "sample_rate": 32000, "n_mels": 64, "hop_length": 640}


@pytest.mark.parametrize("name", [*NEURAL, "nn"])
def test_round_trip_rebuilds_the_same_model(name, tmp_path):
    vocab = vocabulary()
    model = tiny_model(name, vocab).eval()
    path = save_checkpoint(
        tmp_path / "model.pt",
        model_name=name,
        model=model,
        vocab=vocab,
        feature_config=FEATURES,
        step=12,
        epoch=3,
        best_score=0.42,
    )
    loaded = load_checkpoint(path)
    assert loaded.model_name == name
    assert type(loaded.model) is type(model)
    assert loaded.model.config == model.config
    assert loaded.vocab == vocab
    assert loaded.feature_config == FEATURES
    assert (loaded.step, loaded.epoch, loaded.best_score) == (12, 3, 0.42)
    data = batch(vocab)
    loaded.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(data), model(data))
    again = beam_search(loaded.model, data, beam_size=2, max_length=5)
    assert [h[0].tokens for h in again] == [
        h[0].tokens for h in beam_search(model, data, beam_size=2, max_length=5)
    ]


def test_checkpoint_records_optimizer_run_config_and_code_version(tmp_path):
    vocab = vocabulary()
    model = tiny_model("lstm", vocab)
    optimizer = torch.optim.Adam(model.parameters())
    run = RunConfig(model_name="lstm", model=model.config, train=TrainConfig(lr=0.01))
    path = save_checkpoint(
        tmp_path / "c.pt",
        model_name="lstm",
        model=model,
        vocab=vocab,
        optimizer=optimizer,
        run_config=run,
    )
    loaded = load_checkpoint(path)
    assert loaded.optimizer_state is not None
    assert loaded.optimizer_state["param_groups"][0]["lr"] == 0.001
    assert loaded.run_config is not None
    assert loaded.run_config["train"]["lr"] == 0.01
    assert loaded.code_version.startswith("earmark ")
    assert read_checkpoint(path)["format"] == CHECKPOINT_FORMAT


def test_unexpected_weights_fail_the_strict_load(tmp_path):
    vocab = vocabulary()
    path = save_checkpoint(
        tmp_path / "c.pt", model_name="lstm", model=tiny_model("lstm", vocab), vocab=vocab
    )
    payload = torch.load(path, weights_only=True)
    payload["state_dict"]["extra.weight"] = torch.zeros(1)
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"weights do not match model 'lstm'.*extra.weight"):
        load_checkpoint(path)


def test_weights_of_another_shape_fail_the_load(tmp_path):
    vocab = vocabulary()
    path = save_checkpoint(
        tmp_path / "c.pt", model_name="lstm", model=tiny_model("lstm", vocab), vocab=vocab
    )
    payload = torch.load(path, weights_only=True)
    payload["model_args"]["decoder_dim"] += 1
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"size mismatch"):
        load_checkpoint(path)


def test_unknown_model_name_in_a_file_lists_the_known_ones(tmp_path):
    vocab = vocabulary()
    path = save_checkpoint(
        tmp_path / "c.pt", model_name="lstm", model=tiny_model("lstm", vocab), vocab=vocab
    )
    payload = torch.load(path, weights_only=True)
    payload["model_name"] = "gpt"
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"unknown model 'gpt' .*known models: act"):
        load_checkpoint(path)


def test_vocabulary_and_model_must_agree(tmp_path):
    vocab = vocabulary()
    path = save_checkpoint(
        tmp_path / "c.pt", model_name="lstm", model=tiny_model("lstm", vocab), vocab=vocab
    )
    payload = torch.load(path, weights_only=True)
    payload["vocab"]["words"].pop()
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"vocab_size=.* but the vocabulary has"):
        load_checkpoint(path)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(CheckpointError, match=r"nope.pt: no such checkpoint file"):
        load_checkpoint(tmp_path / "nope.pt")


def test_a_foreign_file_is_refused(tmp_path):
    path = tmp_path / "notes.pt"
    path.write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match=r"notes.pt: not a readable checkpoint"):
        load_checkpoint(path)


def test_a_dict_without_required_keys_is_refused(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "state_dict": {}}, path)
    with pytest.raises(CheckpointError, match=r"lacks model_name, model_args, vocab"):
        load_checkpoint(path)


def test_saving_replaces_the_file_atomically(tmp_path):
    vocab = vocabulary()
    model = tiny_model("lstm", vocab)
    path = tmp_path / "last.pt"
    save_checkpoint(path, model_name="lstm", model=model, vocab=vocab, step=1)
    save_checkpoint(path, model_name="lstm", model=model, vocab=vocab, step=2)
    assert load_checkpoint(path).step == 2
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


@pytest.mark.parametrize("name", ["act", "maac", "vact_concat"])
def test_a_format_1_checkpoint_loads_in_the_paper_form_it_was_trained_in(name, tmp_path):
    # Format 1 predates model.form; its weights are the paper form's, whose default changed.
    from tests.modeling.captioning_av import av_batch, tiny_av_model

    vocab = vocabulary()
    model = tiny_av_model(name, vocab, form="paper").eval()
    path = save_checkpoint(tmp_path / "old.pt", model_name=name, model=model, vocab=vocab)
    payload = torch.load(path, weights_only=True)
    payload["format"] = 1
    del payload["model_args"]["form"]
    torch.save(payload, path)
    loaded = load_checkpoint(path)
    assert loaded.model.config.form == "paper"  # type: ignore[attr-defined]
    data = av_batch(vocab)
    with torch.no_grad():
        torch.testing.assert_close(loaded.model.eval()(data), model(data))


def test_a_checkpoint_of_an_unknown_format_names_the_formats_read(tmp_path):
    vocab = vocabulary()
    path = save_checkpoint(
        tmp_path / "c.pt", model_name="lstm", model=tiny_model("lstm", vocab), vocab=vocab
    )
    payload = torch.load(path, weights_only=True)
    payload["format"] = 7
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match="checkpoint format 7, this code reads 1, 2"):
        load_checkpoint(path)
