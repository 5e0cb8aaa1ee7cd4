"""Released weights in: safe reading, the name maps' errors, word lists, the command."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from django.core.management import CommandError, call_command

from modeling.ml import released
from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.encoders import ENCODERS, arch_config, load_weights, read_state_dict
from modeling.ml.released import (
    NEVER_PREDICTED,
    Release,
    ReleasedWeightsError,
    check_release,
    convert,
    read_word_list,
    released_vocabulary,
)
from modeling.ml.weights_file import load_file
from tests.modeling.captioning import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.modeling.test_released_parity import WORDS, act_layout, random_state, write_words

TINY_CNN14 = {"widths": [4, 8, 8, 8, 8, 16], "embedding_dim": 16, "classes": 5}
SETS_OFF = []


class Payload:
    """An object a pickle would rebuild by running code: must never be unpickled."""

    def __setstate__(self, state: object) -> None:
        SETS_OFF.append(state)


def _panns_main_file(path: Path) -> dict[str, torch.Tensor]:
    """A file in the layout PANNs' main.py writes: iteration, model, and a sampler state of
    numpy arrays (and the front end's weights, which Earmark recomputes)."""
    network = ENCODERS["cnn14"][0](arch_config("cnn14", TINY_CNN14, 64))
    state = network.state_dict()
    front_end = {"spectrogram_extractor.stft.conv_real.weight": torch.zeros(513, 1, 1024)}
    sampler = {
        "indexes_per_class": [np.arange(4, dtype=np.int64), np.arange(3, dtype=np.int64)],
        "queue": [3, 1],
        "pointers_of_classes": np.zeros(527, dtype=np.int64),
        "random_state": np.random.RandomState(1234).get_state(),
    }
    torch.save({"iteration": 660000, "model": {**state, **front_end}, "sampler": sampler}, path)
    return state


def test_a_panns_file_with_numpy_entries_loads_as_encoder_weights(tmp_path):
    path = tmp_path / "Cnn14_mAP=0.431.pth"
    state = _panns_main_file(path)
    loaded = read_state_dict(path)
    assert loaded.keys() == state.keys()
    network = ENCODERS["cnn14"][0](arch_config("cnn14", TINY_CNN14, 64))
    load_weights(network, path, name="cnn14")
    torch.testing.assert_close(network.state_dict()["fc1.weight"], state["fc1.weight"])


def test_a_file_pickling_other_objects_is_refused_with_the_object_named(tmp_path):
    path = tmp_path / "trojan.pth"
    torch.save({"model": {"w": torch.zeros(1)}, "extra": Payload()}, path)
    with pytest.raises(ValueError, match=r"Payload\) outside the allowed .* not unpickled"):
        load_file(path)
    assert SETS_OFF == []


def test_a_text_file_is_not_a_pytorch_file(tmp_path):
    (tmp_path / "notes.pth").write_text("hello")
    with pytest.raises(ValueError, match=r"notes\.pth: not a PyTorch weights file"):
        load_file(tmp_path / "notes.pth")


def test_a_word_list_pickling_objects_is_refused(tmp_path):
    path = tmp_path / "words_list.p"
    path.write_bytes(pickle.dumps([Payload()]))
    with pytest.raises(ReleasedWeightsError, match="Payload is not allowed"):
        read_word_list(path)
    assert SETS_OFF == []


def test_the_released_vocabulary_keeps_each_word_and_adds_pad_and_unk():
    vocab, rows = released_vocabulary(WORDS, Path("words_list.p"))
    assert vocab.words[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert rows[:4] == [None, 0, 8, None]  # <sos> -> <bos>, <eos> keeps its row
    for word in ("dog", "rain", "falls"):
        assert rows[vocab.id(word)] == WORDS.index(word)
    assert len(vocab) == len(WORDS) + 2


# a 1-block encoder, 1-layer decoder ACT in the released layout: the converter reads the
# depths off the keys, so the error paths run in a blink
def _small_act_state() -> dict[str, torch.Tensor]:
    layout = {
        name: shape
        for name, shape in act_layout(len(WORDS)).items()
        if not any(f"layers.{i}." in name for i in range(1, 12))
    }
    return random_state(layout, seed=7)


def _save(tmp_path: Path, state: dict[str, torch.Tensor], name: str = "mine.pth") -> Path:
    torch.save({"model": state, "optimizer": {}, "epoch": 1}, tmp_path / name)
    return tmp_path / name


def test_a_converted_act_keeps_each_words_rows_and_never_predicts_the_added_ones(tmp_path):
    state = _small_act_state()
    words = write_words(tmp_path / "words_list.p", WORDS)
    converted = convert("act", _save(tmp_path, state), words=words)
    assert converted.model is not None
    assert converted.vocab is not None
    weights, vocab = converted.model.state_dict(), converted.vocab
    dog = vocab.id("dog")
    torch.testing.assert_close(
        weights["embedding.weight"][dog], state["word_emb.weight"][2] * math.sqrt(512)
    )
    torch.testing.assert_close(weights["out.weight"][dog], state["dec_fc.weight"][2])
    assert weights["out.bias"][0] == weights["out.bias"][3] == NEVER_PREDICTED
    assert not weights["embedding.weight"][0].any()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.__setitem__("encoder.bn0.weight", torch.ones(63)), "'encoder.bn0.weight'"),
        (lambda s: s.pop("dec_fc.bias"), "the released key 'dec_fc.bias' is missing"),
        (lambda s: s.__setitem__("decoder.extra", torch.ones(1)), "'decoder.extra' has no place"),
    ],
)
def test_a_bad_act_file_is_refused_with_the_first_mismatching_key(tmp_path, change, message):
    state = _small_act_state()
    change(state)
    words = write_words(tmp_path / "words_list.p", WORDS)
    with pytest.raises(ReleasedWeightsError, match=message):
        convert("act", _save(tmp_path, state), words=words)


def test_a_word_list_of_another_length_is_refused(tmp_path):
    words = write_words(tmp_path / "words_list.p", WORDS[:-1])
    with pytest.raises(ReleasedWeightsError, match=r"has 11 rows, the word list words_list\.p"):
        convert("act", _save(tmp_path, _small_act_state()), words=words)


def test_a_known_release_of_another_kind_is_refused(tmp_path):
    path = _save(tmp_path, _small_act_state(), name="ACTm.pth")
    with pytest.raises(ReleasedWeightsError, match=r"ACTm\.pth is the released 'act' file"):
        convert("panns_cnn14", path)


@pytest.mark.django_db
def test_import_weights_stores_a_checkpoint_that_loads(tmp_path, settings):
    settings.ENCODER_WEIGHTS_DIR = tmp_path / "weights"
    words = write_words(tmp_path / "words_list.p", WORDS)
    path = _save(tmp_path, _small_act_state())
    call_command("import_weights", "act", str(path), "--words", str(words), "--name", "act-m")
    loaded = load_checkpoint(tmp_path / "weights" / "released" / "act-m.pt")
    assert loaded.model_name == "act"
    assert loaded.vocab.words[4:] == [w for w in WORDS if w not in ("<sos>", "<eos>")]
    assert loaded.feature_config is not None
    assert loaded.feature_config["top_db"] == 80.0


@pytest.mark.django_db
def test_import_weights_names_the_bad_key(tmp_path, settings):
    settings.ENCODER_WEIGHTS_DIR = tmp_path / "weights"
    state = _small_act_state()
    del state["encoder.cls_token"]
    words = write_words(tmp_path / "words_list.p", WORDS)
    with pytest.raises(CommandError, match=r"'encoder\.cls_token' is missing"):
        call_command("import_weights", "act", str(_save(tmp_path, state)), "--words", str(words))


# the API queues the same workflow as a job ---------------------------------------------------


def _api_post(user, body):
    import json

    from django.test import Client

    from core.services import api_token_create

    _, raw = api_token_create(user=user, name="script")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client.post("/api/weights/import", json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_staff_queue_an_import_that_the_job_runs(tmp_path, settings, staff):
    from core.models import Job
    from modeling.weights import weights_import_job

    settings.ENCODER_WEIGHTS_DIR = tmp_path
    _save(tmp_path, _small_act_state(), name="ACTm.pth")
    write_words(tmp_path / "words_list.p", WORDS)
    response = _api_post(staff, {"kind": "act", "file": "ACTm.pth", "words": "words_list.p"})
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.queue) == ("weights_import", "gpu")
    result = weights_import_job(job=job, progress=lambda *a, **k: None, **job.params)
    assert result["path"] == "released/ACTm.act.pt"
    assert result["release"] == "ACT_m (SPIDEr 0.4178)"
    assert load_checkpoint(tmp_path / "released" / "ACTm.act.pt").model_name == "act"


@pytest.mark.django_db
def test_only_staff_import_weights(tmp_path, settings, alice):
    settings.ENCODER_WEIGHTS_DIR = tmp_path
    response = _api_post(alice, {"kind": "panns_cnn14", "file": "Cnn14.pth"})
    assert response.status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"kind": "bert", "file": "x.pth"}, "kind: 'bert' is not one of act"),
        ({"kind": "act", "file": "x.pth"}, "words: kind 'act' needs the released word list"),
        ({"kind": "panns_cnn14", "file": "../x.pth"}, "file: ../x.pth is not in"),
    ],
)
def test_a_bad_import_request_is_refused_with_the_field_named(
    tmp_path, settings, staff, body, message
):
    settings.ENCODER_WEIGHTS_DIR = tmp_path
    response = _api_post(staff, body)
    assert response.status_code == 400
    assert message in response.json()["detail"]


# ACT's AudioSet-pretrained encoder --------------------------------------------------------------


def _imported_encoder(tmp_path: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """A one-block audioset_deit.pth in the released layout, imported."""
    from tests.modeling.test_released_parity import audio_transformer_layout

    layout = {
        name: shape
        for name, shape in audio_transformer_layout(prefix="").items()
        if not any(f"layers.{i}." in name for i in range(1, 12))
    }
    state = random_state(layout, seed=9)
    torch.save({"model": state}, tmp_path / "audioset_deit.pth")
    converted = convert("act_encoder", tmp_path / "audioset_deit.pth")
    assert converted.encoder_state is not None
    torch.save(converted.encoder_state, tmp_path / "act_encoder.pt")
    return state, tmp_path / "act_encoder.pt"


def _act_on(path: Path, **changes: object):
    from modeling.ml.config import ACTConfig
    from modeling.ml.registry import build_model

    config = ACTConfig(
        encoder_layers=1, decoder_dim=16, decoder_layers=1, decoder_heads=2, max_frames=500
    )
    for key, value in changes.items():
        setattr(config, key, value)
    config.encoder_init = str(path)
    return build_model("act", config, vocab_size=8)


def test_act_starts_from_the_imported_audioset_encoder(tmp_path):
    released, path = _imported_encoder(tmp_path)
    model = _act_on(path)
    weights = model.state_dict()
    torch.testing.assert_close(
        weights["encoder.project.weight"], released["patch_embed.proj.weight"]
    )
    torch.testing.assert_close(weights["encoder.blocks.norm.weight"], released["mlp_head.0.weight"])
    # to_decoder is (fresh encoder_linear) @ mlp_head.1: its rows lie in the head's row space
    head, to_decoder = released["mlp_head.1.weight"].double(), weights["to_decoder.weight"].double()
    fresh = torch.linalg.lstsq(head.T, to_decoder.T).solution.T
    torch.testing.assert_close(fresh @ head, to_decoder, atol=1e-5, rtol=1e-5)


def test_the_audioset_encoder_needs_the_released_position_table(tmp_path):
    _, path = _imported_encoder(tmp_path)
    with pytest.raises(ValueError, match=r"'encoder\.position' .* model\.max_frames=500"):
        _act_on(path, max_frames=1024)


def cnn14_layout() -> dict[str, tuple[int, ...]]:
    """PANNs Cnn14 as main.py saves it (audioset_tagging_cnn pytorch/models.py: bn0, six conv
    blocks of 64 .. 2048 channels, fc1, fc_audioset; the torchlibrosa front end's buffers)."""
    from tests.modeling.test_released_parity import _bn_layout, _conv_block_layout

    layout: dict[str, tuple[int, ...]] = {
        "spectrogram_extractor.stft.conv_real.weight": (513, 1, 1024),
        "spectrogram_extractor.stft.conv_imag.weight": (513, 1, 1024),
        "logmel_extractor.melW": (513, 64),
        **_bn_layout("bn0", 64),
        "fc1.weight": (2048, 2048),
        "fc1.bias": (2048,),
        "fc_audioset.weight": (527, 2048),
        "fc_audioset.bias": (527,),
    }
    widths = (1, 64, 128, 256, 512, 1024, 2048)
    for i in range(6):
        layout |= _conv_block_layout(f"conv_block{i + 1}", widths[i], widths[i + 1])
    return layout


@pytest.mark.django_db
def test_a_released_layout_cnn14_imports_as_encoder_weights(tmp_path, settings):
    settings.ENCODER_WEIGHTS_DIR = tmp_path / "weights"
    state = random_state(cnn14_layout(), seed=11)
    # the released layout under a name of its own: the released name would be checked
    # against the published size and MD5, which random weights do not have
    path = tmp_path / "cnn14_layout.pth"
    sampler = {"random_state": np.random.RandomState(0).get_state(), "queue": np.arange(3)}
    torch.save({"iteration": 660000, "model": state, "sampler": sampler}, path)
    call_command("import_weights", "panns_cnn14", str(path))
    stored = tmp_path / "weights" / "released" / "cnn14_layout.panns_cnn14.pt"
    network = ENCODERS["cnn14"][0](arch_config("cnn14", {}, 64))
    load_weights(network, stored, name="cnn14")
    torch.testing.assert_close(
        network.state_dict()["conv_block6.conv2.weight"], state["conv_block6.conv2.weight"]
    )
    assert "spectrogram_extractor.stft.conv_real.weight" not in read_state_dict(stored)


# the table of known releases ------------------------------------------------------------------

CONTENT = b"released bytes"
CONTENT_MD5 = "376935f050908a7faa35fbef579d7662"  # md5 of CONTENT (checked by the first test)


def _table(monkeypatch, **fields: object) -> Release:
    row = Release(
        **{
            "name": "Tiny (mAP 1.0)",
            "kind": "panns_cnn14",
            "url": "https://example.org/tiny.pth",
            "licence": "CC BY 4.0",
            "file_name": "tiny.pth",
            "size": len(CONTENT),
            "checksum": CONTENT_MD5,
            **fields,
        }  # type: ignore[arg-type]
    )
    monkeypatch.setattr(released, "RELEASES", (row,))
    return row


def test_the_md5_in_these_tests_is_that_of_the_content():
    import hashlib

    assert hashlib.md5(CONTENT).hexdigest() == CONTENT_MD5


def test_a_file_with_the_published_size_and_checksum_is_the_release(tmp_path, monkeypatch):
    row = _table(monkeypatch)
    (tmp_path / "tiny.pth").write_bytes(CONTENT)
    assert check_release("panns_cnn14", tmp_path / "tiny.pth") == row


def test_a_release_under_another_name_is_recognised_by_size_and_checksum(tmp_path, monkeypatch):
    row = _table(monkeypatch)
    (tmp_path / "downloaded.pth").write_bytes(CONTENT)
    assert check_release("panns_cnn14", tmp_path / "downloaded.pth") == row


def test_a_file_of_another_size_than_its_release_is_refused_naming_both(tmp_path, monkeypatch):
    _table(monkeypatch)
    (tmp_path / "tiny.pth").write_bytes(CONTENT[:-1])
    with pytest.raises(
        ReleasedWeightsError, match=rf"13 bytes, but the release .* has {len(CONTENT)}"
    ):
        check_release("panns_cnn14", tmp_path / "tiny.pth")


def test_a_file_with_another_checksum_than_its_release_is_refused_naming_both(
    tmp_path, monkeypatch
):
    _table(monkeypatch)
    altered = b"RELEASED BYTES"
    (tmp_path / "tiny.pth").write_bytes(altered)
    found = released.digest_of(tmp_path / "tiny.pth", "md5")
    with pytest.raises(ReleasedWeightsError, match=rf"MD5 {found}, but .* has {CONTENT_MD5}"):
        check_release("panns_cnn14", tmp_path / "tiny.pth")


def test_a_sha256_publisher_is_checked_by_sha256(tmp_path, monkeypatch):
    import hashlib

    _table(monkeypatch, checksum=hashlib.sha256(b"other").hexdigest(), checksum_kind="sha256")
    (tmp_path / "tiny.pth").write_bytes(CONTENT)
    with pytest.raises(ReleasedWeightsError, match=r"SHA256 [0-9a-f]{64}, but"):
        check_release("panns_cnn14", tmp_path / "tiny.pth")


def test_an_unknown_file_is_no_release(tmp_path, monkeypatch):
    _table(monkeypatch)
    (tmp_path / "mine.pth").write_bytes(b"something else")
    assert check_release("panns_cnn14", tmp_path / "mine.pth") is None


def test_a_file_named_like_the_published_cnn14_is_checked_against_zenodo(tmp_path):
    # the real table: Zenodo's MD5 and size for Cnn14_mAP=0.431.pth
    path = tmp_path / "Cnn14_mAP=0.431.pth"
    path.write_bytes(CONTENT)
    with pytest.raises(ReleasedWeightsError, match=r"14 bytes, but the release .* has 327428481"):
        check_release("panns_cnn14", path)


@pytest.mark.django_db
def test_an_unknown_file_imports_on_its_shapes_with_a_warning(tmp_path, settings):
    from modeling.weights import weights_import

    settings.ENCODER_WEIGHTS_DIR = tmp_path / "weights"
    words = write_words(tmp_path / "words_list.p", WORDS)
    result = weights_import(kind="act", path=_save(tmp_path, _small_act_state()), words=words)
    assert result.release is None
    assert any(n.startswith("warning: mine.pth is not a known release") for n in result.notes)
