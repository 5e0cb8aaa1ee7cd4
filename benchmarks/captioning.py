"""What the SynthScenes captioning benchmarks (train_synthscenes.py, reproduce.py) share: the
corpus, generated in memory from one seed as `manage.py make_synthscenes` generates it (train
clips with 2 captions, val and test clips with 5); features computed once per front end;
each model's inputs (vocabulary, the attribute words TopDown reads, video frames, MAAC's
keyword targets); and decoding.

Pure PyTorch (no Django, no database): scoring goes through corpus.evaluation, as the app's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence

import torch

import synthscenes
from modeling.ml import retrieval
from modeling.ml.data import CaptionItem, collate
from modeling.ml.decoding import beam_search
from modeling.ml.features import FeatureConfig, extract
from modeling.ml.keywords import KeywordVocabulary
from modeling.ml.models.base import Captioner
from modeling.ml.runtime import to_device
from modeling.ml.video import pixel_features
from modeling.ml.vocab import BOS_ID, EOS_ID, Vocabulary, tokenize

SEED = 2026
SPLITS = ("train", "val", "test")
Splits = dict[str, list[synthscenes.Scene]]
PerSplit = dict[str, list[torch.Tensor]]


def generate_splits(train: int, val: int, test: int, *, seed: int = SEED) -> Splits:
    """Consecutive scenes of one SynthScenes set: train clips carry 2 captions, val and test
    clips 5 (the references the metrics read)."""
    return {
        "train": list(synthscenes.generate_scenes(seed, train, start=0, n_captions=2)),
        "val": list(synthscenes.generate_scenes(seed, val, start=train, n_captions=5)),
        "test": list(synthscenes.generate_scenes(seed, test, start=train + val, n_captions=5)),
    }


class FeatureStore:
    """The splits' features per front end, each computed once: several models read the same
    front end, and extraction is a sizeable share of a CPU run."""

    def __init__(self, splits: Splits) -> None:
        self.splits = splits
        self._computed: dict[str, PerSplit] = {}
        self.seconds = 0.0

    def get(self, config: FeatureConfig) -> PerSplit:
        key = json.dumps(config.to_dict(), sort_keys=True)
        if key not in self._computed:
            started = time.perf_counter()
            self._computed[key] = {
                split: [extract(s.waveform, s.sample_rate, config) for s in scenes]
                for split, scenes in self.splits.items()
            }
            elapsed = time.perf_counter() - started
            self.seconds += elapsed
            clips = sum(map(len, self.splits.values()))
            first = self._computed[key]["train"][0]
            print(
                f"features {config.kind} {config.n_features} x {first.shape[0]} frames "
                f"({config.sample_rate} Hz, hop {config.hop_length}) for {clips} clips: "
                f"{clips / max(elapsed, 1e-9):.0f} clips/s",
                flush=True,
            )
        return self._computed[key]


def render_videos(splits: Splits, *, fps: float, size: int) -> PerSplit:
    """Each scene's video as raw frames (rendered directly, not through MP4), the input of
    the models' trainable frame CNN."""
    return {
        split: [pixel_features(synthscenes.render_video(s, fps=fps, size=size)) for s in scenes]
        for split, scenes in splits.items()
    }


def keyword_targets(
    train: Sequence[synthscenes.Scene], size: int
) -> tuple[int, list[torch.Tensor]]:
    """MAAC's keywords found (at most `size`: the most frequent spaCy keywords of the
    training captions) and each training clip's targets."""
    from postprocessing.nlp import pos_pipeline

    nlp = pos_pipeline()
    tagged = [
        [[(t.text, t.pos_, t.lemma_) for t in nlp(c)] for c in scene.captions] for scene in train
    ]
    keywords = KeywordVocabulary.build([c for clip in tagged for c in clip], size=size)
    print(f"keywords: {len(keywords)} ({', '.join(keywords.words[:8])}, ...)", flush=True)
    return len(keywords), [keywords.targets(clip) for clip in tagged]


def retrieved_attributes(
    splits: Splits, features: PerSplit, vocab: Vocabulary
) -> dict[str, list[list[int]]]:
    """TopDown's attribute words per clip: the event labels of the nearest training clip
    (1NN on mean-pooled features; a training clip is never its own neighbour), the paper's
    realistic setting."""
    label_names = {e.mids[0]: e.label for s in splits["train"] for e in s.events if e.mids}
    bank = retrieval.mean_pooled(features["train"])
    out = {}
    for split in splits:
        queries = retrieval.mean_pooled(features[split])
        exclude = list(range(len(features[split]))) if split == "train" else None
        nearest = retrieval.nearest(bank, queries, exclude=exclude)
        out[split] = [
            vocab.encode_words([label_names.get(m, "") for m in splits["train"][i].mids], limit=16)
            for i in nearest
        ]
    return out


class ClipInputs:
    """One split's per-clip inputs of one model: features, attribute words, video frames
    and keyword targets (None where the model reads none)."""

    def __init__(
        self,
        features: Sequence[torch.Tensor],
        attributes: Sequence[list[int]],
        videos: Sequence[torch.Tensor | None] | None = None,
        keywords: Sequence[torch.Tensor | None] | None = None,
    ) -> None:
        self.features = features
        self.attributes = attributes
        self.videos = videos if videos is not None else [None] * len(features)
        self.keywords = keywords if keywords is not None else [None] * len(features)

    def __len__(self) -> int:
        return len(self.features)

    def item(self, index: int, tokens: list[int]) -> CaptionItem:
        return CaptionItem(
            features=self.features[index],
            tokens=tokens,
            clip_id=str(index),
            attributes=self.attributes[index],
            video=self.videos[index],
            keyword_targets=self.keywords[index],
        )

    def caption_items(
        self, captions: Sequence[Sequence[str]], vocab: Vocabulary
    ) -> list[CaptionItem]:
        """One item per (clip, caption), what the trainer iterates over."""
        return [
            self.item(i, vocab.encode(tokenize(c)))
            for i, clip_captions in enumerate(captions)
            for c in clip_captions
        ]


def decode(
    model: Captioner,
    vocab: Vocabulary,
    clips: ClipInputs,
    *,
    beam: int,
    device: torch.device,
    max_length: int = 30,
    batch_size: int = 64,
) -> dict[str, str]:
    """Each clip's best caption by clip index ("<empty>" for an empty one)."""
    out: dict[str, str] = {}
    model.eval()
    with torch.no_grad():
        for start in range(0, len(clips), batch_size):
            indices = range(start, min(start + batch_size, len(clips)))
            batch = collate([clips.item(i, [BOS_ID, EOS_ID]) for i in indices])
            hyps = beam_search(
                model, to_device(batch, device), beam_size=beam, max_length=max_length
            )
            for i, h in zip(indices, hyps, strict=True):
                out[str(i)] = (vocab.decode(h[0].tokens) if h else "") or "<empty>"
    return out


def references(scenes: Sequence[synthscenes.Scene]) -> Mapping[str, list[str]]:
    return {str(i): list(s.captions) for i, s in enumerate(scenes)}
