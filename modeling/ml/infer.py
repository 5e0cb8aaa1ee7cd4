"""Captioning clips with a trained captioner: clip features in, ranked hypotheses out.

A clip is anything with ``clip_id``, ``features`` ``(T, F)`` and ``video`` ``(Tv, Fv)`` or None
(the Django side passes ``modeling.datasets.ClipCaptions``). Clips are decoded in batches,
greedily for a beam of 1, else by beam search; the hypotheses (``modeling.ml.decoding``) carry
their log-probability and token entropies, which suggestions and active learning rank by.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import torch
from torch import Tensor

from modeling.ml.data import CaptionItem, collate
from modeling.ml.decoding import Hypothesis, beam_search, greedy
from modeling.ml.models.base import Batch, Captioner
from modeling.ml.runtime import to_device
from modeling.ml.vocab import BOS_ID, EOS_ID, Vocabulary

# Shown for a clip whose best caption is empty: the metrics need at least one word.
EMPTY_CAPTION = "<empty>"


class ClipInput(Protocol):
    """What decoding reads of a clip."""

    @property
    def clip_id(self) -> int: ...

    @property
    def features(self) -> Tensor | None: ...

    @property
    def video(self) -> Tensor | None: ...


def clip_batch(clips: Sequence[ClipInput], attributes: Mapping[int, list[int]]) -> Batch:
    """The model's input batch for ``clips``: their features, video and attribute word ids,
    with an empty caption (``<bos> <eos>``) each."""
    items = [
        CaptionItem(
            features=clip.features,  # type: ignore[arg-type]
            tokens=[BOS_ID, EOS_ID],
            clip_id=str(clip.clip_id),
            attributes=attributes.get(clip.clip_id, []),
            video=clip.video,
        )
        for clip in clips
    ]
    return collate(items)


def caption_clips(
    model: Captioner,
    vocab: Vocabulary,
    clips: Sequence[ClipInput],
    *,
    beam_size: int,
    attributes: Mapping[int, list[int]] | None = None,
    batch_size: int = 32,
    device: torch.device | None = None,
    length_penalty: float = 1.0,
) -> list[list[Hypothesis]]:
    """Hypotheses (best first) for each clip, in order: one greedy caption for
    ``beam_size=1``, else the beam, ranked with ``length_penalty`` (the run's
    decoding.length_penalty). ``device`` defaults to the model's."""
    device = device or next(iter(model.parameters()), torch.zeros(0)).device
    model.eval()
    out: list[list[Hypothesis]] = []
    with torch.no_grad():
        for start in range(0, len(clips), batch_size):
            batch = to_device(
                clip_batch(clips[start : start + batch_size], attributes or {}), device
            )
            if beam_size == 1:
                out.extend([hyp] for hyp in greedy(model, batch, max_length=vocab.max_length))
            else:
                out.extend(
                    beam_search(
                        model,
                        batch,
                        beam_size=beam_size,
                        max_length=vocab.max_length,
                        length_penalty=length_penalty,
                    )
                )
    return out


def best_captions(
    model: Captioner,
    vocab: Vocabulary,
    clips: Sequence[ClipInput],
    *,
    beam_size: int = 1,
    attributes: Mapping[int, list[int]] | None = None,
    length_penalty: float = 1.0,
) -> dict[str, str]:
    """Each clip's best caption as text, by clip id (as text): what evaluation scores."""
    hypotheses = caption_clips(
        model,
        vocab,
        clips,
        beam_size=beam_size,
        attributes=attributes,
        length_penalty=length_penalty,
    )
    return {
        str(clip.clip_id): (vocab.decode(hyps[0].tokens) if hyps else "") or EMPTY_CAPTION
        for clip, hyps in zip(clips, hypotheses, strict=True)
    }
