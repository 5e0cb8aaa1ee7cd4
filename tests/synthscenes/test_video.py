"""synthscenes.video: shapes that appear while their sound plays, off-screen sounds and silent
distractors by design, and determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest

import synthscenes as S
from synthscenes.video import shape_mask

CELL = S.VIDEO_SIZE // 3


@pytest.fixture(scope="module")
def scenes() -> list[S.Scene]:
    return list(S.generate_scenes(21, 300))


def _block(frame: np.ndarray, cell: int) -> np.ndarray:
    row, col = divmod(cell, 3)
    return frame[row * CELL : (row + 1) * CELL, col * CELL : (col + 1) * CELL]


def _times(count: int) -> np.ndarray:
    return (np.arange(count) + 0.5) / S.VIDEO_FPS


def _types_seen(frames: np.ndarray) -> set[str]:
    """Read the video alone: the foreground types whose exact shape in its colour fills some
    cell in some frame (every scale the generator uses is tried)."""
    seen = set()
    for frame in frames:
        for cell in range(9):
            block = _block(frame, cell)
            for key, (colour, shape) in S.VISUALS.items():
                painted = np.all(block == colour, axis=-1)
                if not painted.any():
                    continue
                for scale in {s * d for s in S.SCALES.values() for d in (1.0, 0.6)}:
                    if np.array_equal(painted, shape_mask(shape, CELL, scale * CELL / 2)):
                        seen.add(key)
    return seen


def test_the_same_seed_gives_the_same_video() -> None:
    a, b = S.generate_scene(3, 17), S.generate_scene(3, 17)
    assert a.visuals == b.visuals
    assert np.array_equal(S.render_video(a), S.render_video(b))


def test_every_foreground_type_has_its_own_look() -> None:
    assert set(S.VISUALS) == set(S.FOREGROUND)
    assert len(set(S.VISUALS.values())) == len(S.VISUALS)
    assert set(S.TINTS) == set(S.BACKGROUND)


def test_a_shape_is_on_screen_exactly_while_its_event_lasts(scenes: list[S.Scene]) -> None:
    for scene in scenes[:60]:
        frames = S.render_video(scene)
        assert frames.shape == (40, S.VIDEO_SIZE, S.VIDEO_SIZE, 3)
        for visual in scene.visuals:
            if visual.cell < 0:
                continue
            colour = S.VISUALS[visual.type][0]
            for frame, t in zip(frames, _times(len(frames)), strict=True):
                painted = np.all(_block(frame, visual.cell) == colour, axis=-1).any()
                assert painted == (visual.on_screen and visual.onset <= t < visual.offset), (
                    scene.name,
                    visual,
                    t,
                )


def test_a_background_sound_tints_the_frame_when_shown(scenes: list[S.Scene]) -> None:
    tinted = [v for scene in scenes for v in scene.visuals if v.cell < 0 and v.on_screen]
    assert tinted
    for scene in scenes[:60]:
        corner = S.render_video(scene)[:, 0, 0]  # the top-left pixel is never under a shape
        tint = [v for v in scene.visuals if v.cell < 0 and v.on_screen]
        expected = S.TINTS[tint[0].type] if tint else S.BLANK
        assert (corner == expected).all(), scene.name


def test_video_is_partly_informative_by_design(scenes: list[S.Scene]) -> None:
    sounding = [v for s in scenes for v in s.visuals if v.sounding and v.cell >= 0]
    on_screen = sum(v.on_screen for v in sounding) / len(sounding)
    distracted = sum(any(not v.sounding for v in s.visuals) for s in scenes) / len(scenes)
    assert 0.65 < on_screen < 0.85  # a quarter of what is heard is not seen
    assert 0.25 < distracted < 0.42  # a third of the scenes show something never heard
    for scene in scenes:
        heard = {e.type for e in scene.events}
        assert all(v.type not in heard for v in scene.visuals if not v.sounding)


def test_the_video_alone_names_what_is_on_screen_heard_or_not(scenes: list[S.Scene]) -> None:
    agree = misleading = 0
    for scene in scenes[:80]:
        seen = _types_seen(S.render_video(scene))
        shown = {v.type for v in scene.visuals if v.cell >= 0 and v.on_screen}
        assert seen == shown, scene.name
        heard = {e.type for e in scene.events if e.level != "background"}
        agree += seen == heard
        misleading += bool(seen - heard) or bool(heard - seen)
    assert agree > 10  # often the video shows exactly what sounds ...
    assert misleading > 10  # ... often it misses a sound or shows a silent one


def test_video_tells_apart_sounds_that_differ_only_in_pitch(scenes: list[S.Scene]) -> None:
    beeps = [
        (scene, v)
        for scene in scenes
        for v in scene.visuals
        if v.type in ("beep_high", "beep_low") and v.on_screen and v.sounding
    ]
    assert len(beeps) >= 5
    for scene, visual in beeps[:10]:
        seen = _types_seen(S.render_video(scene))
        other = "beep_low" if visual.type == "beep_high" else "beep_high"
        assert visual.type in seen
        assert (other in seen) == any(v.type == other and v.on_screen for v in scene.visuals)


def test_metadata_lists_the_visuals() -> None:
    scene = S.generate_scene(7, 3)
    visuals = json.loads(json.dumps(scene.metadata()))["visuals"]
    assert [v["type"] for v in visuals] == [v.type for v in scene.visuals]
