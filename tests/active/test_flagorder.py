"""The order model of the flags (active/flagorder.py): which sound source fits its slot in a
caption read in order, learned with the fixture flag model."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import numpy as np
import pytest

from active import flagmodel
from active.flagmodel import FEATURES, FlagModel
from active.flagorder import (
    MIN_SLOTS,
    NO_ORDER,
    ORDER_FEATURES,
    OrderModel,
    order_learn,
    slot_count,
    torch_slot_log_probs,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def order(model: FlagModel) -> OrderModel:
    """An order model learned from the fixture slices, as flag_model_learn would from a
    corpus with enough source slots (the fixture has fewer than MIN_SLOTS: its flag model
    does without one)."""
    clips = flagmodel.read_caption_csv(FIXTURES / "flags/clotho_development_head.csv")
    clips += flagmodel.read_caption_csv(FIXTURES / "flags/audiocaps_train_head.csv")
    sequences = [[model.sequence(t) for t in clip] for clip in clips]
    return order_learn(clips=sequences, sources=list(model.sources), stop=model.stop)


def test_a_corpus_with_few_source_slots_gets_no_order_model(model: FlagModel) -> None:
    """The fixture's 2,400 clips hold fewer than MIN_SLOTS source slots: the flag model is
    learned without an order model and its order features are the no-evidence constants."""
    clips = flagmodel.read_caption_csv(FIXTURES / "flags/clotho_development_head.csv")
    clips += flagmodel.read_caption_csv(FIXTURES / "flags/audiocaps_train_head.csv")
    sequences = [[model.sequence(t) for t in clip] for clip in clips]
    assert slot_count(sequences, list(model.sources), model.stop) < MIN_SLOTS
    assert model.order is None
    clip = ["A dog barks.", "A dog is barking.", "A canine yelps."]
    caps = [model.caption(t) for t in clip]
    values, _ = flagmodel.caption_features(caps[0], caps[1:], model)
    assert values[-len(ORDER_FEATURES) :] == NO_ORDER


def _alone(model: FlagModel, order: OrderModel, text: str) -> dict[str, float]:
    return dict(zip(ORDER_FEATURES, order.clip_features([model.sequence(text)])[0], strict=True))


def test_it_tells_which_noun_goes_with_which_verb(model: FlagModel, order: OrderModel) -> None:
    right = "A car passes by while a dog barks."
    swapped = "A dog passes by while a car barks."
    # the bag-of-words context model sees the same words in both
    assert model.context is not None
    same = [model.context.features(model.caption(t).ids, []) for t in (right, swapped)]
    # equal up to the order of a float sum (the words come in another order): 1e-12
    assert same[0][0] == pytest.approx(same[1][0], rel=0, abs=1e-12)
    assert same[0][1] == same[1][1]
    assert (
        _alone(model, order, swapped)["order_own_fit"]
        < _alone(model, order, right)["order_own_fit"]
    )
    assert _alone(model, order, swapped)["order_own_margin"] < 0.0


def test_a_swapped_source_fits_its_slot_worse_than_the_original(
    model: FlagModel, order: OrderModel
) -> None:
    """On clips the model never learned from (the Clotho validation slice), the benchmark's
    swap (first source noun for another) lowers the order fit in most captions."""
    ontology = json.loads((FIXTURES / "audioset_ontology.json").read_text(encoding="utf-8"))
    swaps = [w for w in flagmodel.source_names(ontology) if w in order.source_index]
    clips = flagmodel.read_caption_csv(FIXTURES / "flags/clotho_validation_head.csv")[:80]
    rng = random.Random(0)
    lower, gaps = 0, []
    for clip in clips:
        bad = flagmodel.corrupt("wrong-source", clip[0], rng=rng, pool=[], lazy=[], sources=swaps)
        if bad is None:
            continue
        others = [model.sequence(t) for t in clip[1:]]
        before = order.features_in_clip(model.sequence(clip[0]), others)[0]
        after = order.features_in_clip(model.sequence(bad), others)[0]
        lower += after < before
        gaps.append(before - after)
    assert len(gaps) >= 30
    assert lower >= 0.7 * len(gaps)
    assert float(np.mean(gaps)) > 0.3


def test_numpy_scoring_is_the_pytorch_forward(model: FlagModel, order: OrderModel) -> None:
    texts = [
        "A dog barks loudly while a car passes.",
        "Rain falls on a tin roof.",
        "A man speaks and birds chirp.",
        "Something happens.",
    ]
    captions = [model.sequence(t) for t in texts]
    with_others = [[captions[j] for j in range(len(texts)) if j != i] for i in range(len(texts))]
    without: list[list[list[str]]] = [[] for _ in texts]
    for others in (with_others, without):
        ours = order.slot_log_probs(captions, others)
        reference = torch_slot_log_probs(order, captions, others)
        assert [len(slots) for slots in ours] == [len(slots) for slots in reference]
        assert sum(len(slots) for slots in ours) >= 4
        for mine, theirs in zip(ours, reference, strict=True):
            for (k, row), (k2, row2) in zip(mine, theirs, strict=True):
                assert k == k2
                assert np.exp(row).sum() == pytest.approx(1.0)
                np.testing.assert_allclose(row, row2, atol=1e-4)


def test_a_clip_batch_gives_each_caption_its_own_features(
    model: FlagModel, order: OrderModel
) -> None:
    clip = [
        model.sequence(t)
        for t in (
            "A dog barks while cars pass.",
            "A canine yelps as traffic drives past.",
            "Nothing in particular.",
        )
    ]
    batch = order.clip_features(clip)
    assert batch[2] == NO_ORDER  # no source slot: no evidence
    assert batch[0][-1] == 1.0
    alone = order.clip_features([clip[0]])[0]
    # the own-caption features do not depend on the other captions
    assert batch[0][1] == pytest.approx(alone[1])
    assert batch[0][3] == pytest.approx(alone[3])


def test_it_round_trips_and_feeds_the_source_network_only(
    model: FlagModel, order: OrderModel, tmp_path: Path
) -> None:
    with_order = dataclasses.replace(model, order=order)
    ontology = json.loads((FIXTURES / "audioset_ontology.json").read_text(encoding="utf-8"))
    swaps = [w for w in flagmodel.source_names(ontology) if w in model.index]
    clips = flagmodel.read_caption_csv(FIXTURES / "flags/clotho_development_head.csv")[:150]
    with_order.detector = flagmodel._fit_detector(with_order, clips, swaps, 0)
    path = tmp_path / "m.npz"
    with_order.save(path)
    again = FlagModel.load(path)
    assert again.order is not None
    caption = [model.sequence("A dog barks while a car passes.")]
    assert again.order.clip_features(caption)[0] == pytest.approx(order.clip_features(caption)[0])
    assert FEATURES[-len(ORDER_FEATURES) :] == ORDER_FEATURES
    assert again.detector is not None
    assert again.detector.source is not None
    assert len(again.detector.general.mean) == len(FEATURES) - len(ORDER_FEATURES)
    assert len(again.detector.source.mean) == len(FEATURES)
    # without an order model (the fixture's) the source network does without the block
    assert model.detector is not None
    assert model.detector.source is not None
    assert len(model.detector.source.mean) == len(FEATURES) - len(ORDER_FEATURES)
