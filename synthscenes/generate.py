"""SynthScenes generation: scene ``index`` of the set ``seed``, the same for the same inputs.

Plan, audio, captions and video come from four separate random streams: the waveform of a
scene does not depend on how many captions are asked for, the first k captions of a scene
are the same whatever n >= k is requested, and the video changes neither.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from synthscenes.captions import captions_for
from synthscenes.scenes import SAMPLE_RATE, SCENE_SECONDS, Scene, plan_scene, render_scene
from synthscenes.video import plan_visuals


def generate_scene(
    seed: int,
    index: int,
    *,
    sample_rate: int = SAMPLE_RATE,
    seconds: float = SCENE_SECONDS,
    n_captions: int = 5,
    event_weights: Mapping[str, float] | None = None,
) -> Scene:
    """Scene `index` of the SynthScenes set `seed`: the same inputs give the same scene
    (`event_weights`: see `plan_scene`)."""
    if index < 0 or seed < 0:
        raise ValueError("seed and index must be >= 0")
    plan_rng = np.random.default_rng([seed, index, 0])
    audio_rng = np.random.default_rng([seed, index, 1])
    caption_rng = np.random.default_rng([seed, index, 2])
    visual_rng = np.random.default_rng([seed, index, 3])
    structure, events = plan_scene(plan_rng, seconds, event_weights=event_weights)
    waveform = render_scene(audio_rng, events, sample_rate, seconds)
    captions = captions_for(structure, events, caption_rng, n_captions)
    visuals = plan_visuals(visual_rng, events, seconds)
    return Scene(seed, index, sample_rate, structure, events, captions, waveform, visuals)


def generate_scenes(
    seed: int,
    count: int,
    *,
    start: int = 0,
    sample_rate: int = SAMPLE_RATE,
    seconds: float = SCENE_SECONDS,
    n_captions: int = 5,
    event_weights: Mapping[str, float] | None = None,
) -> Iterator[Scene]:
    """Scenes `start` to `start + count - 1` of the set `seed`, one at a time."""
    for index in range(start, start + count):
        yield generate_scene(
            seed, index, sample_rate=sample_rate, seconds=seconds, n_captions=n_captions,
            event_weights=event_weights,
        )  # fmt: skip
