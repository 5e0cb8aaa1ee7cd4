"""synthscenes.captions: AudioCaps-style captions that name every event, in time order."""

from __future__ import annotations

import re

import pytest

import synthscenes as S


@pytest.fixture(scope="module")
def scenes() -> list[S.Scene]:
    return list(S.generate_scenes(11, 40))


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


def test_counts_and_loudness_reach_the_captions() -> None:
    texts = " ".join(c for s in S.generate_scenes(4, 60, n_captions=2) for c in s.captions)
    for word in ("twice", "three times", "loudly", "in the background", "followed by", "while"):
        assert word in texts, word
