"""benchmarks/captioning.py's corpus: worker processes return, scene for scene and in scene
order, what generating the scenes in one process and featurising them one by one gives, as
the benchmarks did before workers (a handful of scenes on CPU; speed is measured by
benchmarks/synthscenes_corpus.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import synthscenes
from benchmarks import captioning
from modeling.ml.features import extract, feature_preset
from modeling.ml.video import pixel_features

# two front ends of different rates and kinds (the 32 kHz log-mel ACT reads, the 16 kHz
# Kaldi fbank the BiLSTM reads: a resampling on the way), at 10 frames/s to stay small
FRONT_ENDS = (
    dataclasses.replace(feature_preset("act"), hop_length=3200),
    dataclasses.replace(feature_preset("bilstm"), hop_length=1600),
)
VIDEO = captioning.VideoSpec(fps=2.0, size=12)
TRAIN, VAL, TEST = 6, 1, 2


def _serial_reference() -> tuple[
    list[synthscenes.Scene], list[list[torch.Tensor]], list[torch.Tensor]
]:
    """The scenes as the benchmarks built them before workers: generated in this process
    (train with 2 captions, then val and test with 5), features and video from each
    waveform."""
    seed = captioning.SEED
    scenes = [
        *synthscenes.generate_scenes(seed, TRAIN, start=0, n_captions=2),
        *synthscenes.generate_scenes(seed, VAL + TEST, start=TRAIN, n_captions=5),
    ]
    features = [[extract(s.waveform, s.sample_rate, c) for s in scenes] for c in FRONT_ENDS]
    videos = [
        pixel_features(synthscenes.render_video(s, fps=VIDEO.fps, size=VIDEO.size)) for s in scenes
    ]
    return scenes, features, videos


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_return_the_serial_features_videos_and_captions_in_scene_order(
    workers: int,
) -> None:
    corpus = captioning.generate_corpus(
        TRAIN, VAL, TEST, feature_configs=FRONT_ENDS, video=VIDEO, workers=workers,
        # chunks of scenes 0-4, 5, 6 and 7-8: the second worker is done with 5 and 6 well
        # before the first is with 0-4, so results taken as they finish come out of order
        chunk_size=5,
    )  # fmt: skip
    scenes, features, videos = _serial_reference()
    got = [scene for split in captioning.SPLITS for scene in corpus.splits[split]]
    assert [len(corpus.splits[split]) for split in captioning.SPLITS] == [TRAIN, VAL, TEST]
    assert [s.index for s in got] == [s.index for s in scenes] == list(range(TRAIN + VAL + TEST))
    for info, scene in zip(got, scenes, strict=True):
        assert not hasattr(info, "waveform")
        assert info.captions == scene.captions
        assert info.events == scene.events
        assert info.mids == scene.mids
    for config, expected in zip(FRONT_ENDS, features, strict=True):
        per_split = corpus.features.get(config)
        computed = [f for split in captioning.SPLITS for f in per_split[split]]
        assert len(computed) == len(expected)
        for index, (a, b) in enumerate(zip(computed, expected, strict=True)):
            # bit for bit: one torch thread in a worker computes what the parent's threads do
            assert a.dtype == b.dtype == torch.float32
            assert torch.equal(a, b), f"{config.kind} features of scene {index} differ"
    assert corpus.videos is not None
    rendered = [v for split in captioning.SPLITS for v in corpus.videos[split]]
    assert all(torch.equal(a, b) for a, b in zip(rendered, videos, strict=True))


def test_no_video_unless_asked_and_a_front_end_not_computed_is_named() -> None:
    corpus = captioning.generate_corpus(1, 0, 1, feature_configs=FRONT_ENDS[:1], workers=1)
    assert corpus.videos is None
    assert [len(corpus.splits[s]) for s in captioning.SPLITS] == [1, 0, 1]
    assert corpus.splits["test"][0].index == 1
    assert len(corpus.splits["test"][0].captions) == 5
    with pytest.raises(ValueError, match=r"features fbank \(16000 Hz, hop 1600\) were not"):
        corpus.features.get(FRONT_ENDS[1])


def test_bad_sizes_are_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
        captioning.generate_corpus(1, 1, 1, feature_configs=FRONT_ENDS, workers=0)
    with pytest.raises(ValueError, match="val must be >= 0 scenes, got -1"):
        captioning.generate_corpus(1, -1, 1, feature_configs=FRONT_ENDS)
