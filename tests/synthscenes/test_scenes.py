"""synthscenes.scenes: planned events stay inside the scene, follow the weights, and come in
both orders."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

import synthscenes as S


def test_events_stay_inside_the_scene_and_sequences_do_not_overlap() -> None:
    rng = np.random.default_rng(0)
    for _ in range(500):
        structure, events = S.plan_scene(rng)
        assert all(0.0 <= e.onset < e.offset <= S.SCENE_SECONDS for e in events)
        assert len({e.type for e in events}) == len(events)
        if structure in S.SEQUENTIAL:
            fg = [e for e in events if e.level != "background"]
            assert all(a.offset < b.onset for a, b in itertools.pairwise(fg))


def test_event_weights_skew_which_sounds_scenes_hold() -> None:
    weights = {key: 1.0 for key in S.EVENT_TYPES} | {"speech_man": 50.0, "rain": 50.0}
    held: Counter[str] = Counter()
    rng = np.random.default_rng(1)
    for _ in range(400):
        _, events = S.plan_scene(rng, event_weights=weights)
        assert len({e.type for e in events}) == len(events)
        held.update({e.type for e in events})
    assert held["speech_man"] > 4 * held["knock"]
    assert held["rain"] > 2 * held["wind"]  # background sounds follow their weights too


def test_event_weights_that_leave_too_few_sounds_are_refused() -> None:
    one_foreground = {key: float(key in S.BACKGROUND) for key in S.EVENT_TYPES}
    one_foreground["speech_man"] = 1.0
    # the structure is drawn first, whatever the weights: find a seed planning two sounds
    seed = next(i for i in range(50) if S.plan_scene(np.random.default_rng(i))[0] == "sequence")
    with pytest.raises(ValueError, match="fewer than 2"):
        S.plan_scene(np.random.default_rng(seed), event_weights=one_foreground)


def test_order_matters_both_orders_of_a_pair_occur() -> None:
    rng = np.random.default_rng(1)
    pairs: Counter[tuple[str, str]] = Counter()
    for _ in range(3000):
        structure, events = S.plan_scene(rng)
        if structure == "sequence":
            pairs[(events[0].type, events[1].type)] += 1
    both = [p for p in pairs if (p[1], p[0]) in pairs]
    assert len(both) > 0.5 * len(pairs)
