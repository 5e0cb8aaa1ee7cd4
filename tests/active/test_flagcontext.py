"""The context model of the flags (active/flagcontext.py): which words fit a caption's own
other words and the clip's other captions, learned with the fixture flag model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from active.flagcontext import CONTEXT_FEATURES, ContextModel
from active.flagmodel import FlagModel

CLIP = [
    "A dog barks repeatedly while cars pass by on a busy road.",
    "A canine yelps over and over as traffic drives past.",
    "Traffic goes by as a dog is barking loudly.",
    "Vehicles drive past while a dog keeps barking.",
]


@pytest.fixture(scope="module")
def context(model: FlagModel) -> ContextModel:
    assert model.context is not None
    return model.context


def _features(model: FlagModel, text: str) -> dict[str, float]:
    assert model.context is not None
    caption = model.caption(text)
    values, _ = model.context.features(caption.ids, [model.caption(t).ids for t in CLIP])
    return dict(zip(CONTEXT_FEATURES, values, strict=True))


def test_a_barking_dog_fits_its_own_words_better_than_a_barking_piano(model: FlagModel) -> None:
    right = _features(model, "A dog barks loudly.")
    swapped = _features(model, "A piano barks loudly.")
    assert swapped["source_own_fit"] < right["source_own_fit"]
    assert swapped["source_fit"] < right["source_fit"]


def test_the_other_captions_expect_a_paraphrase_more_than_another_clips_caption(
    model: FlagModel,
) -> None:
    paraphrase = _features(model, "A dog is barking as cars drive by.")
    off_topic = _features(model, "Rain falls steadily on a tin roof.")
    assert off_topic["context_fit"] < paraphrase["context_fit"]
    assert off_topic["context_relative"] < paraphrase["context_relative"]


def test_a_caption_without_a_source_says_so(model: FlagModel) -> None:
    assert _features(model, "Something happens.")["names_source"] == 0.0
    assert _features(model, "A dog barks.")["names_source"] == 1.0


def test_its_probabilities_are_a_distribution(context: ContextModel, model: FlagModel) -> None:
    rows = context.log_probs([model.caption("a dog barks").ids, []], [[], []])
    assert rows.shape == (2, context.n_out)
    assert np.exp(rows).sum(axis=1) == pytest.approx([1.0, 1.0], abs=1e-3)


def test_it_round_trips_through_the_flag_model_file(model: FlagModel, tmp_path: Path) -> None:
    path = tmp_path / "m.npz"
    model.save(path)
    again = FlagModel.load(path)
    assert again.context is not None
    assert model.context is not None
    assert again.context.n_out == model.context.n_out
    caption = model.caption("A dog barks.")
    before, _ = model.context.features(caption.ids, [model.caption(t).ids for t in CLIP])
    after, _ = again.context.features(caption.ids, [model.caption(t).ids for t in CLIP])
    assert after == pytest.approx(before, abs=0.05)  # embeddings are stored as float16


def _slice(model: FlagModel) -> list[list[list[int]]]:
    """The first 30 clips of the Clotho validation fixture slice, as word ids."""
    from active.flagmodel import read_caption_csv

    fixtures = Path(__file__).resolve().parents[1] / "fixtures/flags"
    clips = read_caption_csv(fixtures / "clotho_validation_head.csv")[:30]
    return [[model.caption(t).ids for t in clip] for clip in clips]


def test_a_clips_batch_gives_each_captions_reference_features(
    context: ContextModel, model: FlagModel
) -> None:
    for clip in _slice(model):
        fast = context.clip_features(clip)
        for i, own in enumerate(clip):
            values, worst = context.features(own, clip[:i] + clip[i + 1 :])
            assert fast[i][1] == worst
            assert fast[i][0] == pytest.approx(values, rel=0, abs=1e-9)


def test_the_flag_probabilities_of_the_batched_path_are_the_references(
    model: FlagModel,
) -> None:
    from active.flagmodel import FEATURES, Calibration, caption_features

    assert model.detector is not None
    assert model.context is not None
    clips = _slice(model)
    for ids, texts in zip(clips, _texts(), strict=True):
        for i, text in enumerate(texts):
            others = [model.caption(t) for t in texts[:i] + texts[i + 1 :]]
            fast, _ = caption_features(model.caption(text), others, model)
            reference, _ = model.context.features(ids[i], [o.ids for o in others])
            # the context block sits inside FEATURES (the sentence and order blocks follow it)
            start = FEATURES.index(CONTEXT_FEATURES[0])
            end = start + len(CONTEXT_FEATURES)
            slow = fast[:start] + reference + fast[end:]
            assert Calibration().probability(model.detector.score(fast)) == pytest.approx(
                Calibration().probability(model.detector.score(slow)), rel=0, abs=1e-9
            )


def _texts() -> list[list[str]]:
    from active.flagmodel import read_caption_csv

    fixtures = Path(__file__).resolve().parents[1] / "fixtures/flags"
    return read_caption_csv(fixtures / "clotho_validation_head.csv")[:30]
