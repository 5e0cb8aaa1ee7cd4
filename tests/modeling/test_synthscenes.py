from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from modeling.ml import synthscenes as S
from tests.conftest import FIXTURES


@pytest.fixture(scope="module")
def scenes() -> list[S.Scene]:
    return list(S.generate_scenes(11, 40))


def test_the_same_seed_gives_the_same_scene() -> None:
    a, b = S.generate_scene(3, 17), S.generate_scene(3, 17)
    assert np.array_equal(a.waveform, b.waveform)
    assert a.captions == b.captions
    assert a.events == b.events


def test_other_seeds_and_indices_give_other_scenes() -> None:
    base = S.generate_scene(3, 17)
    for other in (S.generate_scene(4, 17), S.generate_scene(3, 18)):
        assert not np.array_equal(base.waveform, other.waveform)


def test_a_scene_does_not_depend_on_the_caption_count_or_its_neighbours() -> None:
    five = S.generate_scene(5, 2, n_captions=5)
    one = S.generate_scene(5, 2, n_captions=1)
    in_a_run = list(S.generate_scenes(5, 3))[2]
    assert np.array_equal(five.waveform, one.waveform)
    assert np.array_equal(five.waveform, in_a_run.waveform)
    assert one.captions == five.captions[:1]


def test_the_waveform_is_ten_seconds_of_float32_audio(scenes: list[S.Scene]) -> None:
    for scene in scenes:
        assert scene.waveform.dtype == np.float32
        assert scene.waveform.shape == (320_000,)
        assert 0.01 < np.abs(scene.waveform).max() <= 0.95
    low = S.generate_scene(0, 0, sample_rate=16_000)
    assert low.waveform.shape == (160_000,)


def test_sound_sits_where_the_events_say() -> None:
    for index in range(200):
        scene = S.generate_scene(2, index, n_captions=1)
        if scene.structure == "single" and not scene.events[0].distant:
            break
    else:
        pytest.fail("no single-event scene in 200")
    event, sr = scene.events[0], scene.sample_rate
    inside = scene.waveform[int(event.onset * sr) : int(event.offset * sr)]
    before = scene.waveform[: int(event.onset * sr)]
    after = scene.waveform[int(event.offset * sr) + sr // 2 :]  # past a distant tail
    outside = np.concatenate([before, after])
    assert np.sqrt(np.mean(inside**2)) > 20 * np.sqrt(np.mean(outside**2))


def test_every_event_type_renders_sound() -> None:
    rng = np.random.default_rng(0)
    for key, kind in S.EVENT_TYPES.items():
        sound = kind.render(rng, 32_000, 2.0, 2)
        assert sound.shape == (64_000,), key
        assert np.isfinite(sound).all(), key
        assert np.abs(sound).max() > 0, key


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


def test_every_label_is_a_real_audioset_class() -> None:
    ontology = {
        entry["id"]: entry
        for entry in json.loads((FIXTURES / "audioset_ontology.json").read_text())
    }
    for kind in S.EVENT_TYPES.values():
        for mid in kind.mids:
            assert mid in ontology, mid
            assert ontology[mid]["name"] == S.LABEL_NAMES[mid]
            assert "abstract" not in ontology[mid].get("restrictions", [])
            assert "blacklist" not in ontology[mid].get("restrictions", [])


def test_scenes_carry_their_labels_and_names(scenes: list[S.Scene]) -> None:
    scene = scenes[0]
    assert scene.name == "synth-11-0"
    assert scene.mids == list(dict.fromkeys(m for e in scene.events for m in e.mids))
    assert json.loads(json.dumps(scene.metadata()))["captions"] == scene.captions


def test_there_are_five_different_audiocaps_style_captions(scenes: list[S.Scene]) -> None:
    for scene in scenes:
        assert len(scene.captions) == 5
        assert len(set(scene.captions)) == 5
        for text in scene.captions:
            assert text[0].isupper()
            assert not text.endswith(".")
            assert not re.search(r"\bthere (is|are)\b", text, re.IGNORECASE)
            assert 2 <= len(text.split()) <= 30


def test_captions_mention_every_event(scenes: list[S.Scene]) -> None:
    for scene in scenes:
        for text in scene.captions:
            for event in scene.events:
                assert re.search(S.EVENT_TYPES[event.type].cue, text, re.IGNORECASE), (
                    text,
                    event.type,
                )


def test_captions_mention_sequences_in_time_order() -> None:
    checked = 0
    for index in range(120):
        scene = S.generate_scene(9, index)
        if scene.structure not in S.SEQUENTIAL:
            continue
        fg = [e for e in scene.events if e.level != "background"]
        for text in scene.captions:
            assert S.mentions_in_order(text, fg), (text, [e.type for e in fg])
            assert not S.mentions_in_order(text, fg[::-1]), text
        checked += 1
    assert checked > 30


def test_order_matters_both_orders_of_a_pair_occur() -> None:
    rng = np.random.default_rng(1)
    pairs: Counter[tuple[str, str]] = Counter()
    for _ in range(3000):
        structure, events = S.plan_scene(rng)
        if structure == "sequence":
            pairs[(events[0].type, events[1].type)] += 1
    both = [p for p in pairs if (p[1], p[0]) in pairs]
    assert len(both) > 0.5 * len(pairs)


def test_counts_and_loudness_reach_the_captions() -> None:
    texts = " ".join(c for s in S.generate_scenes(4, 60, n_captions=2) for c in s.captions)
    for word in ("twice", "three times", "loudly", "in the background", "followed by", "while"):
        assert word in texts, word


def test_wav_files_hold_the_scene(tmp_path: Path) -> None:
    scene = S.generate_scene(1, 0)
    path = S.write_scene(tmp_path, scene)
    assert path.name == "synth-1-0.wav"
    samples, rate = sf.read(str(path), dtype="float32")
    assert rate == 32_000
    assert np.abs(samples - scene.waveform).max() < 1e-4
    assert sf.info(str(path)).subtype == "PCM_16"
