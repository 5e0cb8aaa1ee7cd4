"""synthscenes.generate: scene `index` of set `seed`, the same for the same inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

import synthscenes as S


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


def test_scenes_carry_their_labels_and_names(scenes: list[S.Scene]) -> None:
    scene = scenes[0]
    assert scene.name == "synth-11-0"
    assert scene.mids == list(dict.fromkeys(m for e in scene.events for m in e.mids))
    assert json.loads(json.dumps(scene.metadata()))["captions"] == scene.captions


def test_the_video_does_not_change_the_audio_or_captions() -> None:
    scene = S.generate_scene(5, 2)
    rng = np.random.default_rng([5, 2, 0])
    structure, events = S.plan_scene(rng)
    assert (structure, events) == (scene.structure, scene.events)
    assert np.array_equal(
        scene.waveform,
        S.render_scene(np.random.default_rng([5, 2, 1]), events, S.SAMPLE_RATE, 10.0),
    )
