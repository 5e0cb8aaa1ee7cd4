"""Pretrained word vectors for a captioner's word embeddings (fastText's text format).

A ``.vec`` file (fastText's ``cc.en.300.vec``, or any word2vec-style text file) has an optional
header line ``<count> <dim>`` and then one word per line followed by its ``dim`` values. Only
the words of the run's vocabulary are kept, so reading a 2-million-word file holds a few
thousand vectors in memory. fastText's binary ``.bin`` models are not read (they need the
fasttext package); export their vectors to text first.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO

import torch
from torch import Tensor, nn

from modeling.ml.vocab import SPECIALS, Vocabulary


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="strict")
    return path.open(encoding="utf-8", errors="strict")


def read_word_vectors(path: str | Path, words: set[str]) -> tuple[int, dict[str, Tensor]]:
    """(dim, {word: vector}) for the ``words`` the file holds; a malformed line is an error
    naming the file and the line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"word vectors file {path} does not exist")
    dim = 0
    found: dict[str, Tensor] = {}
    try:
        with _open(path) as handle:
            for number, line in enumerate(handle, start=1):
                parts = line.rstrip("\n").rstrip(" ").split(" ")
                if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    dim = int(parts[1])  # the "<count> <dim>" header
                    continue
                if len(parts) < 2:
                    raise ValueError(f"{path} line {number}: not 'word v1 v2 ...'")
                if not dim:
                    dim = len(parts) - 1
                if len(parts) - 1 != dim:
                    raise ValueError(
                        f"{path} line {number}: {len(parts) - 1} values, the file's vectors "
                        f"have {dim}"
                    )
                if parts[0] in words and parts[0] not in found:
                    try:
                        found[parts[0]] = torch.tensor([float(v) for v in parts[1:]])
                    except ValueError:
                        raise ValueError(f"{path} line {number}: a value is not a number") from None
    except UnicodeDecodeError:
        raise ValueError(
            f"{path}: not a text word-vector file (fastText .vec); binary .bin models are not read"
        ) from None
    if not dim:
        raise ValueError(f"{path}: holds no word vectors")
    return dim, found


def load_word_vectors(embedding: nn.Embedding, vocab: Vocabulary, path: str | Path) -> int:
    """Copies the file's vectors into the rows of ``embedding`` for the vocabulary's words
    (the specials keep their rows); returns how many words had a vector."""
    words = {word for word in vocab.words if word not in SPECIALS}
    dim, found = read_word_vectors(path, words)
    if dim != embedding.embedding_dim:
        raise ValueError(
            f"{path}: vectors of {dim} values, the model's word embeddings have "
            f"{embedding.embedding_dim} (set model.embed_dim={dim})"
        )
    with torch.no_grad():
        for word, vector in found.items():
            embedding.weight[vocab.id(word)] = vector.to(embedding.weight)
    return len(found)
