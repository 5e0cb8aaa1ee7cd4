"""SynthScenes video rendering: each scene's short low-resolution video.

The video is planned from its own random stream, so the audio and captions are unchanged by
it: each foreground event type has its own coloured shape (``VISUALS``), drawn in one cell of
a 3 x 3 grid while the event sounds (bigger when loud, smaller when distant); a background
sound tints the whole frame half of the time. By design the video is only partly
informative, as real video hints are: a quarter of the sounding events are off-screen, and a
third of the scenes show a silent distractor, a shape whose sound is never heard. Where it is
on screen the video disambiguates what audio alone finds hard (the two beeps differ only in
pitch, the two voices in f0 and formants, but their shapes differ); elsewhere it is
redundant or misleading.
"""

from __future__ import annotations

import numpy as np

from synthscenes.events import FOREGROUND
from synthscenes.scenes import SCENE_SECONDS, Scene, SceneEvent, VisualEvent

VIDEO_FPS = 4.0
VIDEO_SIZE = 48  # pixels per side: 16 per grid cell
# foreground type -> (RGB, shape); each pair is unique, so a type is told by its look
VISUALS: dict[str, tuple[tuple[int, int, int], str]] = {
    "beep_high": ((255, 230, 0), "triangle"),
    "beep_low": ((255, 230, 0), "square"),
    "siren": ((255, 40, 40), "disc"),
    "speech_man": ((40, 90, 255), "bar"),
    "speech_woman": ((255, 100, 200), "bar"),
    "dog": ((150, 90, 30), "disc"),
    "bird": ((40, 200, 60), "triangle"),
    "telephone": ((0, 220, 220), "square"),
    "knock": ((150, 90, 30), "square"),
    "horn": ((255, 140, 0), "disc"),
    "hammer": ((170, 170, 180), "cross"),
    "clapping": ((255, 210, 170), "ring"),
    "thunder": ((255, 255, 255), "bar"),
}
# background type -> the tint of the whole frame while it sounds
TINTS: dict[str, tuple[int, int, int]] = {
    "rain": (50, 60, 100),
    "wind": (80, 100, 80),
    "engine": (90, 70, 50),
    "water": (30, 90, 110),
    "ticking": (90, 90, 90),
}
BLANK = (20, 20, 20)
ON_SCREEN = 0.75  # chance that a sounding foreground event is in the picture
TINT_SHOWN = 0.5  # chance that a background sound tints the picture
DISTRACTOR = 0.33  # chance of a silent distractor shape in a scene
SCALES = {"loud": 0.95, "normal": 0.75, "quiet": 0.55}


def plan_visuals(
    rng: np.random.Generator, events: list[SceneEvent], seconds: float = SCENE_SECONDS
) -> list[VisualEvent]:
    """What the video of a scene with these events shows, cell by cell."""
    cells = [int(c) for c in rng.permutation(9)]
    visuals = []
    for event in events:
        if event.level == "background":
            shown = bool(rng.random() < TINT_SHOWN)
            visuals.append(VisualEvent(event.type, event.onset, event.offset, shown, True, -1, 0.0))
            continue
        shown = bool(rng.random() < ON_SCREEN)
        scale = SCALES[event.level] * (0.6 if event.distant else 1.0)
        visuals.append(
            VisualEvent(event.type, event.onset, event.offset, shown, True, cells.pop(), scale)
        )
    if rng.random() < DISTRACTOR:
        present = {e.type for e in events}
        kind = str(rng.choice([k for k in FOREGROUND if k not in present]))
        length = float(rng.uniform(1.5, 4.0))
        onset = float(rng.uniform(0.0, seconds - length))
        visuals.append(
            VisualEvent(
                kind,
                round(onset, 3),
                round(onset + length, 3),
                True,
                False,
                cells.pop(),
                float(rng.choice(list(SCALES.values()))),
            )
        )
    return visuals


def shape_mask(shape: str, size: int, radius: float) -> np.ndarray:
    """(size, size) bool mask of a shape centred in a size x size cell."""
    axis = np.arange(size) + 0.5 - size / 2
    y, x = np.meshgrid(axis, axis, indexing="ij")
    r = radius
    if shape == "disc":
        return x**2 + y**2 <= r**2
    if shape == "square":
        return (np.abs(x) <= r * 0.8) & (np.abs(y) <= r * 0.8)
    if shape == "triangle":
        return (y <= r * 0.8) & (y >= -r) & (np.abs(x) <= (y + r) * 0.55)
    if shape == "bar":
        return (np.abs(x) <= r * 0.35) & (np.abs(y) <= r)
    if shape == "cross":
        return ((np.abs(x) <= r * 0.3) | (np.abs(y) <= r * 0.3)) & (np.maximum(abs(x), abs(y)) <= r)
    if shape == "ring":
        d = np.sqrt(x**2 + y**2)
        return (d <= r) & (d >= r * 0.55)
    raise ValueError(f"unknown shape {shape!r}")


def render_video(scene: Scene, *, fps: float = VIDEO_FPS, size: int = VIDEO_SIZE) -> np.ndarray:
    """The scene's video: (frames, size, size, 3) uint8 RGB, one frame per 1/fps seconds
    (sampled at the middle of its interval). ``size`` must be a multiple of 3."""
    if size % 3 or size < 12:
        raise ValueError(f"video size must be a multiple of 3 and at least 12, got {size}")
    seconds = len(scene.waveform) / scene.sample_rate
    count = max(1, round(seconds * fps))
    cell = size // 3
    frames = np.empty((count, size, size, 3), np.uint8)
    for i in range(count):
        t = (i + 0.5) / fps
        frame = frames[i]
        frame[:] = BLANK
        live = [v for v in scene.visuals if v.on_screen and v.onset <= t < v.offset]
        for visual in live:
            if visual.cell < 0:
                frame[:] = TINTS[visual.type]
        for visual in live:
            if visual.cell < 0:
                continue
            colour, shape = VISUALS[visual.type]
            row, col = divmod(visual.cell, 3)
            block = frame[row * cell : (row + 1) * cell, col * cell : (col + 1) * cell]
            block[shape_mask(shape, cell, visual.scale * cell / 2)] = colour
    return frames
