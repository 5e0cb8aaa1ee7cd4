"""synthscenes.events: every event type sounds and carries real AudioSet labels."""

from __future__ import annotations

import json

import numpy as np

import synthscenes as S
from tests.conftest import FIXTURES


def test_every_event_type_renders_sound() -> None:
    rng = np.random.default_rng(0)
    for key, kind in S.EVENT_TYPES.items():
        sound = kind.render(rng, 32_000, 2.0, 2)
        assert sound.shape == (64_000,), key
        assert np.isfinite(sound).all(), key
        assert np.abs(sound).max() > 0, key


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
