"""Word vectors from a fastText text file for the AudioCaps models' word embeddings."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest
import torch

from modeling.ml.config import LSTMConfig, RunConfig, TopDownConfig
from modeling.ml.presets import model_preset, train_preset
from modeling.ml.trainer import train
from modeling.ml.vocab import Vocabulary
from modeling.ml.word_vectors import load_word_vectors, read_word_vectors
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    items,
    one_torch_thread,  # noqa: F401
    vocabulary,
)

DIM = 16  # the tiny presets' embed_dim


def _vectors(vocab: Vocabulary, *, dim: int = DIM) -> dict[str, list[float]]:
    """A vector for every second vocabulary word plus words the vocabulary lacks."""
    gen = torch.Generator().manual_seed(4)
    words = [*vocab.words[4::2], "zebra", "xylophone"]
    return {w: torch.randn(dim, generator=gen).tolist() for w in words}


def _write(path: Path, vectors: dict[str, list[float]], *, header: bool = True) -> Path:
    lines = [f"{len(vectors)} {len(next(iter(vectors.values())))}"] if header else []
    lines += [" ".join([word, *(f"{v:.6f}" for v in values)]) for word, values in vectors.items()]
    text = "\n".join(lines) + "\n"
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "header"), [("cc.vec", True), ("plain.txt", False), ("x.vec.gz", True)]
)
def test_only_the_vocabularys_words_are_read(tmp_path: Path, name: str, header: bool) -> None:
    vectors = _vectors(vocabulary())
    path = _write(tmp_path / name, vectors, header=header)
    dim, found = read_word_vectors(path, {"dog", "rain", "zebra", "nothing"})
    assert dim == DIM
    assert set(found) == {"zebra", *({"dog", "rain"} & set(vectors))}
    torch.testing.assert_close(found["zebra"], torch.tensor(vectors["zebra"]), atol=1e-6, rtol=0)


def test_a_short_line_is_named_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.vec"
    path.write_text("2 3\ndog 0.1 0.2 0.3\ncat 0.1 0.2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.vec line 3: 2 values, the file's vectors have 3"):
        read_word_vectors(path, {"dog"})


def test_a_binary_model_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "cc.en.300.bin"
    path.write_bytes(b"\xba\x16\x4f\x2f\x0c\x00\x00\x00\xff\xfe")
    with pytest.raises(ValueError, match=r"binary \.bin models are not read"):
        read_word_vectors(path, {"dog"})


def test_the_embedding_rows_of_known_words_take_the_vectors(tmp_path: Path) -> None:
    vocab = vocabulary()
    vectors = _vectors(vocab)
    embedding = torch.nn.Embedding(len(vocab), DIM, padding_idx=0)
    before = embedding.weight.detach().clone()
    found = load_word_vectors(embedding, vocab, _write(tmp_path / "v.vec", vectors))
    known = [w for w in vectors if w in vocab]
    assert found == len(known)
    for word in vocab.words:
        row = embedding.weight[vocab.id(word)].detach()
        if word in vectors:
            torch.testing.assert_close(row, torch.tensor(vectors[word]), atol=1e-6, rtol=0)
        else:
            assert torch.equal(row, before[vocab.id(word)])  # specials and unknown words


def test_vectors_of_another_size_name_the_setting(tmp_path: Path) -> None:
    vocab = vocabulary()
    path = _write(tmp_path / "v.vec", _vectors(vocab, dim=5))
    with pytest.raises(ValueError, match=r"model\.embed_dim=5"):
        load_word_vectors(torch.nn.Embedding(len(vocab), DIM), vocab, path)


@pytest.mark.parametrize("model", ["lstm", "tempatt", "topdown"])
def test_training_starts_from_the_word_vectors(tmp_path: Path, model: str) -> None:
    vocab = vocabulary()
    vectors = _vectors(vocab)
    path = _write(tmp_path / "v.vec", vectors)
    config = model_preset(model, "tiny")
    assert isinstance(config, LSTMConfig | TopDownConfig)
    config = dataclasses.replace(config, word_vectors=str(path))
    run = RunConfig(
        model_name=model, model=config, train=dataclasses.replace(train_preset("tiny"), epochs=1)
    )
    at_start: dict[str, torch.Tensor] = {}

    def record(trainer, _info):
        weight = trainer.model.decoder.embedding.weight.detach()
        at_start.update({w: weight[vocab.id(w)].clone() for w in vectors if w in vocab})

    train(
        run=run,
        vocab=vocab,
        train_items=items(vocab),
        out_dir=tmp_path / "run",
        callbacks={"train_start": [record]},
    )
    assert at_start
    for word, row in at_start.items():
        torch.testing.assert_close(row, torch.tensor(vectors[word]), atol=1e-6, rtol=0)


def test_a_model_without_word_vectors_refuses_them(tmp_path: Path) -> None:
    from modeling.ml.registry import build_model

    model = build_model("act", model_preset("act", "tiny"), vocab_size=len(vocabulary()))
    with pytest.raises(ValueError, match="ACTCaptioner takes no word vectors"):
        model.load_word_vectors(tmp_path / "v.vec", vocabulary())
