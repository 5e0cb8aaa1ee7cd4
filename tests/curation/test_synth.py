"""curation.synth: the demo's sounds are SynthScenes' synthesizer's, at the demo's level."""

from __future__ import annotations

import numpy as np

from curation import synth
from synthscenes import sounds


def test_every_demo_sound_is_float32_audio_at_the_demo_level() -> None:
    for name, (generate, _, _) in synth.DEMO_SOUNDS.items():
        samples = generate(np.random.default_rng(0), 32_000, 2.0)
        assert samples.dtype == np.float32, name
        assert samples.shape == (64_000,), name
        assert np.abs(samples).max() <= synth.DEMO_PEAK + 1e-6, name
        assert np.sqrt(np.mean(samples**2)) > 0.02, name


def test_the_same_seed_gives_the_same_sounds() -> None:
    for generate, _, _ in synth.DEMO_SOUNDS.values():
        a = generate(np.random.default_rng(4), 16_000, 1.0)
        b = generate(np.random.default_rng(4), 16_000, 1.0)
        assert np.array_equal(a, b)


def test_a_demo_sound_is_the_synthesizers_sound_rescaled() -> None:
    barks = synth.dog_barks(np.random.default_rng(1), 32_000, 3.0)
    made = sounds.bark(np.random.default_rng(1), 32_000, 3.0, 5)
    assert np.allclose(barks / np.abs(barks).max(), made / np.abs(made).max(), atol=1e-6)
