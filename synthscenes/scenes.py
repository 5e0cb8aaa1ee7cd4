"""SynthScenes scene planning and mixing: what a scene holds (``Scene``, ``SceneEvent``,
``VisualEvent``), how its events are drawn and timed (``plan_scene``) and how their sounds
are mixed into its waveform (``render_scene``).

A scene holds one to three foreground events in sequence or at the same time, sometimes over
a background sound; loudness, distance, repetition counts and order vary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from synthscenes.events import BACKGROUND, EVENT_TYPES, FOREGROUND, LABEL_NAMES
from synthscenes.sounds import add_at, far_away

SCENE_SECONDS = 10.0
SAMPLE_RATE = 32_000


# level -> gain range in dB relative to the reference loudness
LEVELS: dict[str, tuple[float, float]] = {
    "loud": (-1.0, 0.0),
    "normal": (-8.0, -5.0),
    "quiet": (-18.0, -14.0),
}
BACKGROUND_GAIN = (-20.0, -14.0)
DISTANT_GAIN = -8.0  # on top of the level; a distant event is also low-passed and reverberant
REFERENCE_RMS = 0.1

# structure -> probability
STRUCTURES: dict[str, float] = {
    "single": 0.15,
    "sequence": 0.30,
    "overlap": 0.15,
    "background": 0.20,
    "sequence3": 0.10,
    "sequence_background": 0.10,
}
SEQUENTIAL = ("sequence", "sequence3", "sequence_background")


# what a scene holds ---------------------------------------------------------------------------


@dataclass
class SceneEvent:
    type: str  # EVENT_TYPES key
    onset: float  # seconds
    offset: float  # seconds
    count: int  # bursts for countable types, 1 otherwise
    level: str  # loud | normal | quiet | background
    distant: bool
    gain_db: float
    mids: list[str] = field(default_factory=list)
    label: str = ""  # AudioSet name of the first mid (filled from the type)


@dataclass
class VisualEvent:
    """Something the scene's video shows (or, off-screen, would show)."""

    type: str  # EVENT_TYPES key
    onset: float  # seconds
    offset: float  # seconds
    on_screen: bool  # False: the event sounds but is not in the picture
    sounding: bool  # False: a silent distractor, seen but never heard
    cell: int  # 0..8, row-major in the 3 x 3 grid; -1 for a background tint
    scale: float  # radius as a share of the cell's half-width (0 for a tint)


@dataclass
class Scene:
    seed: int
    index: int
    sample_rate: int
    structure: str  # see STRUCTURES
    events: list[SceneEvent]  # foreground in time order, then the background (if any)
    captions: list[str]
    waveform: np.ndarray = field(repr=False)  # float32 (samples,)
    visuals: list[VisualEvent] = field(default_factory=list)  # what the video shows

    @property
    def name(self) -> str:
        return f"synth-{self.seed}-{self.index}"

    @property
    def mids(self) -> list[str]:
        """AudioSet labels of the scene, each once, in order of first appearance."""
        seen: dict[str, None] = {}
        for event in self.events:
            for mid in event.mids:
                seen.setdefault(mid, None)
        return list(seen)

    def metadata(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "index": self.index,
            "sample_rate": self.sample_rate,
            "structure": self.structure,
            "events": [asdict(e) for e in self.events],
            "visuals": [asdict(v) for v in self.visuals],
            "mids": self.mids,
            "captions": self.captions,
        }


# planning -------------------------------------------------------------------------------------


def _plan_event(
    rng: np.random.Generator, key: str, budget: float, *, level: str | None = None
) -> SceneEvent:
    kind = EVENT_TYPES[key]
    if kind.countable:
        period = rng.uniform(*kind.period)
        most = max(1, min(6, int(budget / period)))
        count = int(rng.choice(np.arange(1, most + 1)))
        seconds = count * period
    else:
        count = 1
        low, high = kind.seconds
        seconds = rng.uniform(min(low, budget), min(high, budget))
    level = level or str(rng.choice(["loud", "normal", "normal", "quiet"]))
    distant = level != "loud" and rng.random() < 0.15
    return SceneEvent(
        type=key,
        onset=0.0,
        offset=float(seconds),
        count=count,
        level=level,
        distant=bool(distant),
        gain_db=0.0,
        mids=list(kind.mids),
        label=LABEL_NAMES[kind.mids[0]],
    )


def _pick(
    rng: np.random.Generator,
    pool: tuple[str, ...],
    k: int,
    weights: Mapping[str, float] | None = None,
) -> list[str]:
    """`k` different event types from `pool`: uniformly, or in proportion to `weights`
    (types it leaves out weigh nothing)."""
    if weights is None:  # the uniform draw, kept as it was so existing sets do not change
        return [str(x) for x in rng.choice(pool, size=k, replace=False)]
    p = np.array([max(0.0, float(weights.get(key, 0.0))) for key in pool])
    if np.count_nonzero(p) < k:
        raise ValueError(f"event weights leave fewer than {k} of {', '.join(pool)} possible")
    return [str(x) for x in rng.choice(pool, size=k, replace=False, p=p / p.sum())]


def plan_scene(
    rng: np.random.Generator,
    seconds: float = SCENE_SECONDS,
    *,
    event_weights: Mapping[str, float] | None = None,
) -> tuple[str, list[SceneEvent]]:
    """A structure and its events with onsets/offsets in seconds (before rendering).

    `event_weights` (event type -> relative frequency) skews which sounds a scene holds, as
    real collections are skewed (AudioSet's unbalanced list has 150 times more clips of a
    man speaking than of knocking); None draws every type equally often."""
    w = event_weights
    names = list(STRUCTURES)
    structure = str(rng.choice(names, p=np.array([STRUCTURES[s] for s in names])))
    usable = seconds - 0.4
    events: list[SceneEvent] = []
    if structure in ("single", "background"):
        event = _plan_event(rng, _pick(rng, FOREGROUND, 1, w)[0], min(6.0, usable))
        shift = rng.uniform(0.2, max(0.2, usable - event.offset))
        event.onset, event.offset = shift, shift + event.offset
        events.append(event)
    elif structure == "overlap":
        first, second = _pick(rng, FOREGROUND, 2, w)
        long = _plan_event(rng, first, usable)
        if EVENT_TYPES[first].countable or long.offset < 4.0:
            # the longer-lasting sound carries the scene; re-plan it as a continuous one
            continuous = tuple(k for k in FOREGROUND if not EVENT_TYPES[k].countable)
            first = _pick(rng, continuous, 1, w)[0]
            if first == second:
                second = _pick(rng, tuple(k for k in FOREGROUND if k != first), 1, w)[0]
            long = _plan_event(rng, first, usable)
            long.offset = max(long.offset, min(usable, 4.0))
        start = rng.uniform(0.1, max(0.1, usable - long.offset))
        long.onset, long.offset = start, start + long.offset
        span = long.offset - long.onset
        short = _plan_event(rng, second, span * 0.8)
        inner = rng.uniform(long.onset, max(long.onset, long.offset - short.offset))
        short.onset, short.offset = inner, inner + short.offset
        events += sorted([long, short], key=lambda e: e.onset)
    else:
        k = 3 if structure == "sequence3" else 2
        keys = _pick(rng, FOREGROUND, k, w)
        gaps = rng.uniform(0.3, 0.9, size=k - 1)
        budget = (usable - gaps.sum()) / k
        planned = [_plan_event(rng, key, budget) for key in keys]
        slack = usable - gaps.sum() - sum(e.offset for e in planned)
        t = 0.2 + rng.uniform(0.0, max(0.0, slack) * 0.5)
        for i, event in enumerate(planned):
            length = event.offset
            event.onset, event.offset = t, t + length
            t = event.offset + (gaps[i] if i < k - 1 else 0.0)
        events += planned
    if structure in ("background", "sequence_background"):
        present = {e.type for e in events}
        bg_key = _pick(rng, tuple(k for k in BACKGROUND if k not in present), 1, w)[0]
        bg = _plan_event(rng, bg_key, seconds, level="normal")
        bg.onset, bg.offset, bg.level, bg.distant = 0.0, seconds, "background", False
        events.append(bg)
    for event in events:
        low, high = BACKGROUND_GAIN if event.level == "background" else LEVELS[event.level]
        event.gain_db = float(rng.uniform(low, high) + (DISTANT_GAIN if event.distant else 0.0))
        event.onset, event.offset = round(float(event.onset), 3), round(float(event.offset), 3)
    return structure, events


# mixing ---------------------------------------------------------------------------------------


def render_scene(
    rng: np.random.Generator, events: list[SceneEvent], sample_rate: int, seconds: float
) -> np.ndarray:
    """The scene's waveform: float32 (round(seconds * sample_rate),), each event at its level
    (relative to ``REFERENCE_RMS``), distant ones far away, peaks at most 0.95."""
    n = round(seconds * sample_rate)
    mix = np.zeros(n)
    for event in events:
        kind = EVENT_TYPES[event.type]
        length = event.offset - event.onset
        sound = kind.render(rng, sample_rate, length, event.count)
        active = sound[np.abs(sound) > 1e-4 * (np.abs(sound).max() + 1e-12)]
        rms = float(np.sqrt(np.mean(active**2))) if active.size else 0.0
        if rms > 0:
            sound = sound / rms * REFERENCE_RMS * 10 ** (event.gain_db / 20)
        if event.distant:
            sound = far_away(sound, sample_rate, rng)
        add_at(mix, round(event.onset * sample_rate), sound)
    mix += 1e-4 * rng.standard_normal(n)  # a faint noise floor, as in real recordings
    peak = float(np.abs(mix).max())
    if peak > 0.95:
        mix *= 0.95 / peak
    return mix.astype(np.float32)
