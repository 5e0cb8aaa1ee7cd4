"""The sentence encoder of the flags (active/flagsentence.py): captions of one clip closer
than other clips' captions, learned with the fixture flag model and checked on a slice of
captions it never saw."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from active import flagmodel
from active.flagmodel import FEATURES, FlagModel
from active.flagsentence import NO_SENTENCE, SENTENCE_FEATURES, SentenceModel, torch_encode
from tests.conftest import FLAG_FIXTURES

HELD_OUT = flagmodel.read_caption_csv(FLAG_FIXTURES / "clotho_validation_head.csv")


@pytest.fixture(scope="module")
def model(flag_model_file: Path) -> FlagModel:
    return FlagModel.load(flag_model_file)


@pytest.fixture(scope="module")
def sentence(model: FlagModel) -> SentenceModel:
    assert model.sentence is not None
    return model.sentence


def _bags(model: FlagModel, texts: list[str]) -> list[list[int]]:
    return [model.caption(t).ids for t in texts]


def test_paraphrases_of_one_clip_are_closer_than_another_clips_caption(
    model: FlagModel, sentence: SentenceModel
) -> None:
    """On held-out clips, a caption is closer to its own clip's other captions' centroid
    than another clip's caption is, for most clips (the encoder never saw these)."""
    clips = [c for c in HELD_OUT if len(c) == 5][:60]
    wins = 0
    for k, clip in enumerate(clips):
        stranger = clips[(k + 7) % len(clips)][0]
        vecs = sentence.encode(_bags(model, [*clip, stranger]))
        centroid = vecs[1:5].sum(axis=0)
        centroid /= np.linalg.norm(centroid)
        wins += float(vecs[0] @ centroid) > float(vecs[5] @ centroid)
    assert wins / len(clips) >= 0.8


def test_a_dog_paraphrase_is_closer_than_rain(model: FlagModel, sentence: SentenceModel) -> None:
    vecs = sentence.encode(
        _bags(
            model,
            [
                "A dog barks repeatedly while cars pass by.",
                "A dog is barking as traffic goes past.",
                "Rain falls steadily on a tin roof.",
            ],
        )
    )
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]


def test_numpy_scoring_equals_the_torch_forward(model: FlagModel, sentence: SentenceModel) -> None:
    texts = [t for clip in HELD_OUT[:10] for t in clip] + ["", "the the"]
    bags = _bags(model, texts)
    assert np.allclose(sentence.encode(bags), torch_encode(sentence, bags), atol=1e-9)


def test_an_off_topic_caption_is_mostly_the_clips_outlier(
    model: FlagModel, sentence: SentenceModel
) -> None:
    """Another clip's caption among four of a held-out clip has a lower margin than the mean
    of the clip's own captions' margins, and is most often the worst-fitting one."""
    clips = [c for c in HELD_OUT if len(c) == 5][:60]
    lower = lowest = 0
    for k, clip in enumerate(clips):
        rows = sentence.clip_features(_bags(model, [*clip[:4], clips[(k + 7) % len(clips)][0]]))
        named = [dict(zip(SENTENCE_FEATURES, r, strict=True)) for r in rows]
        lower += bool(named[4]["sent_margin"] < np.mean([r["sent_margin"] for r in named[:4]]))
        lowest += named[4]["sent_lowest"] == 1.0
    assert lower / len(clips) >= 0.8
    assert lowest / len(clips) >= 0.5


def test_the_sentence_features_reach_the_detector(model: FlagModel) -> None:
    clip = HELD_OUT[0]
    caps = [model.caption(t) for t in clip]
    values, _ = flagmodel.caption_features(caps[0], caps[1:], model)
    assert len(values) == len(FEATURES)
    start = FEATURES.index(SENTENCE_FEATURES[0])  # the order block follows it
    assert values[start : start + len(SENTENCE_FEATURES)] != NO_SENTENCE
    assert model.detector is not None
    # the general network reads every feature up to the order block, the sentence's included
    assert len(model.detector.general.mean) >= start + len(SENTENCE_FEATURES)


def test_the_encoder_round_trips_through_the_model_file(
    model: FlagModel, sentence: SentenceModel, tmp_path: Path
) -> None:
    path = tmp_path / "m.npz"
    model.save(path)
    again = FlagModel.load(path).sentence
    assert again is not None
    bags = _bags(model, HELD_OUT[0])
    assert np.allclose(again.encode(bags), sentence.encode(bags))


def test_too_few_clips_teach_no_encoder(model: FlagModel) -> None:
    from active.flagsentence import sentence_learn

    bags = [_bags(model, c) for c in HELD_OUT[:3]]
    assert sentence_learn(bags=bags, vectors=model.vectors, weight=model.idf.tolist()) is None
