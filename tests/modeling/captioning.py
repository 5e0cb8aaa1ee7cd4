"""Tiny fake captioning data shared by the modeling tests (no files, no network)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from modeling.ml.data import CaptionItem, collate
from modeling.ml.models.base import Batch, Captioner
from modeling.ml.presets import model_preset
from modeling.ml.registry import build_model
from modeling.ml.vocab import Vocabulary

CAPTIONS = [
    "a dog barks twice",
    "rain falls on a roof while thunder rumbles",
    "a car engine idles",
    "people talk and a bell rings",
    "birds chirp",
    "a siren wails as a car passes",
]
LABELS = [["Dog", "Bark"], ["Rain", "Thunder"], ["Engine"], ["Speech", "Bell"], ["Bird"], ["Siren"]]
# Neural models with a trainable decoder; "nn" is the retrieval baseline.
NEURAL = ["lstm", "tempatt", "topdown", "act", "bilstm"]
FEATURE_DIM = 8


def vocabulary() -> Vocabulary:
    return Vocabulary.build([*CAPTIONS, *(" ".join(labels) for labels in LABELS)], max_length=12)


def items(vocab: Vocabulary, *, seed: int = 0) -> list[CaptionItem]:
    """Six clips of different lengths (5..16 frames) with their caption and label words."""
    gen = torch.Generator().manual_seed(seed)
    return [
        CaptionItem(
            features=torch.randn(5 + 2 * i + (i % 2), FEATURE_DIM, generator=gen),
            tokens=vocab.encode(caption),
            clip_id=f"clip{i}",
            attributes=vocab.encode_words(labels),
        )
        for i, (caption, labels) in enumerate(zip(CAPTIONS, LABELS, strict=True))
    ]


def batch(vocab: Vocabulary, n: int = 4) -> Batch:
    return collate(items(vocab)[:n])


def tiny_model(name: str, vocab: Vocabulary, *, seed: int = 0, **overrides: object) -> Captioner:
    torch.manual_seed(seed)
    config = model_preset(name, "tiny")
    for key, value in overrides.items():
        setattr(config, key, value)
    model = build_model(name, config, vocab_size=len(vocab))
    model.prepare(items(vocab))  # fills the 1NN bank (nn, topdown with retrieval)
    return model


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Run torch single-threaded in these tests and restore the setting afterwards.

    The test machine has 2 cores shared by several processes; with oversubscribed cores torch's
    intra-op threads spin-wait on each other and tiny models run ~30x slower than on one thread.
    Test modules opt in with ``from tests.modeling.captioning import one_torch_thread``.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
