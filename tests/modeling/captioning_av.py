"""Tiny fake audio-visual data for the V-ACT, MAAC and AV captioner tests (no files)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from modeling.ml.data import collate
from modeling.ml.models.base import Batch, Captioner
from modeling.ml.presets import model_preset
from modeling.ml.registry import build_model
from modeling.ml.vocab import Vocabulary
from tests.modeling.captioning import items

VIDEO_DIM = 6
# Video frames per clip; clip 2 has no video at all (a clip whose hint failed to fetch).
VIDEO_LENGTHS = [4, 7, 0, 5, 3, 6]


def videos(*, seed: int = 1) -> list[Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(n, VIDEO_DIM, generator=gen) for n in VIDEO_LENGTHS]


def with_video(batch: Batch, clips: Sequence[Tensor]) -> Batch:
    """Adds "video" (B, Tv, Fv), zero-padded, and "video_lengths" (B,) to a collated batch."""
    width = max(1, *(clip.size(0) for clip in clips))
    video = torch.zeros(len(clips), width, VIDEO_DIM)
    for row, clip in enumerate(clips):
        video[row, : clip.size(0)] = clip
    return {
        **batch,
        "video": video,
        "video_lengths": torch.tensor([clip.size(0) for clip in clips]),
    }


def av_batch(vocab: Vocabulary, rows: Sequence[int] = (0, 1, 2, 3)) -> Batch:
    examples, clips = items(vocab), videos()
    return with_video(collate([examples[i] for i in rows]), [clips[i] for i in rows])


def tiny_av_model(name: str, vocab: Vocabulary, *, seed: int = 0, **overrides: object) -> Captioner:
    torch.manual_seed(seed)
    config = model_preset(name, "tiny")
    for key, value in overrides.items():
        setattr(config, key, value)
    return build_model(name, config, vocab_size=len(vocab))


def padded_pair(vocab: Vocabulary, *, alone: int = 4, others: Sequence[int] = (5, 1)):
    """(batch of clip ``alone`` by itself, batch where others pad it, its row there).

    The padding of the bigger batch holds garbage, which must not leak into the clip's outputs.
    """
    single = av_batch(vocab, [alone])
    rows = [others[0], alone, *others[1:]]
    together = av_batch(vocab, rows)
    row = 1
    frames, video_frames = int(single["feature_lengths"][0]), int(single["video_lengths"][0])
    together["features"][row, frames:] = 1e3
    together["video"][row, video_frames:] = 1e3
    assert together["features"].size(1) > frames
    assert together["video"].size(1) > video_frames
    assert together["tokens"].size(1) > single["tokens"].size(1)
    return single, together, row


def overfit(model: Captioner, batch: Batch, loss_fn, *, steps: int = 40, lr: float = 1e-2):
    """Losses of ``steps`` Adam steps on one batch."""
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    losses = []
    for _ in range(steps):
        loss = loss_fn(model, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def assert_checkpoint_round_trip(name: str, model: Captioner, vocab: Vocabulary, path) -> Captioner:
    """Saving and loading rebuilds the same model from the file alone (same outputs)."""
    from modeling.ml.checkpoint import load_checkpoint, save_checkpoint

    save_checkpoint(path, model_name=name, model=model, vocab=vocab)
    loaded = load_checkpoint(path)
    assert type(loaded.model) is type(model)
    assert loaded.model.config == model.config
    data = av_batch(vocab)
    with torch.no_grad():
        torch.testing.assert_close(loaded.model.eval()(data), model.eval()(data))
    return loaded.model
