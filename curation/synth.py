"""Synthetic everyday sounds for the offline demo and for tests: no downloads needed.

The sounds come from SynthScenes' sound synthesizer (``synthscenes.sounds``); this module
picks one per demo clip, sets its level and writes the demo's WAVs and video hints. Each
generator returns float32 mono samples in [-1, 1] at `sample_rate`.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
from django.conf import settings

from synthscenes import io as scene_io
from synthscenes import sounds

Generator = Callable[[np.random.Generator, int, float], np.ndarray]

# every demo sound is scaled to this RMS (a SynthScenes event's reference loudness), then
# down to DEMO_PEAK where its peaks would go higher: sparse sounds (barks, raindrops) stay
# audible without clipping
DEMO_RMS = 0.1
DEMO_PEAK = 0.95


def _demo_level(sound: np.ndarray) -> np.ndarray:
    rms = float(np.sqrt(np.mean(sound**2)))
    if rms > 0:
        sound = sound * (DEMO_RMS / rms)
        sound = sound * min(1.0, DEMO_PEAK / float(np.abs(sound).max()))
    return sound.astype(np.float32)


def dog_barks(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    return _demo_level(sounds.bark(rng, sr, seconds, 5))


def siren(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    """A siren growing louder as it approaches."""
    t = np.arange(round(seconds * sr)) / sr
    approaching = np.clip(t / seconds * 1.5, 0.2, 1.0)
    return _demo_level(sounds.siren(rng, sr, seconds, 1) * approaching)


def rain(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    return _demo_level(sounds.rain(rng, sr, seconds, 1))


def engine_idling(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    return _demo_level(sounds.engine(rng, sr, seconds, 1))


def bird_chirps(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    return _demo_level(sounds.chirps(rng, sr, seconds, 1))


def telephone_ringing(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    """A ring every 4 s or so, as a telephone's cadence."""
    return _demo_level(sounds.telephone(rng, sr, seconds, max(1, math.ceil(seconds / 4.0))))


# file name -> (generator, AudioSet label ids, ffmpeg colour for its video hint)
DEMO_SOUNDS: dict[str, tuple[Generator, list[str], str]] = {
    "dog_barking.wav": (dog_barks, ["/m/0bt9lr", "/m/05tny_"], "saddlebrown"),
    "siren_approaching.wav": (siren, ["/m/03kmc9"], "red"),
    "rain_on_roof.wav": (rain, ["/m/06mb1"], "slategray"),
    "engine_idling.wav": (engine_idling, ["/m/02mk9", "/m/07pb8fc"], "darkolivegreen"),
    "birds_chirping.wav": (bird_chirps, ["/m/015p6", "/m/07pggtn"], "skyblue"),
    "telephone_ringing.wav": (telephone_ringing, ["/m/07pp8cl"], "gold"),
}


def write_wav(path: Path, samples: np.ndarray, sample_rate: int) -> None:
    """16-bit PCM; louder samples are scaled to peak at 0.9 rather than clipped."""
    peak = float(np.abs(samples).max()) or 1.0
    scene_io.write_wav(path, samples / max(peak, 1.0) * 0.9, sample_rate)


def write_video_hint(path: Path, colour: str, seconds: float) -> None:
    """A small, silent H.264 video: a coloured frame with moving test bars."""
    command = [
        settings.FFMPEG_BINARY,
        "-nostdin",
        "-v",
        "error",
        "-y",
        "-f",
        "lavfi",
        "-i",
        f"color=c={colour}:size=160x90:rate=5:duration={seconds}",
        "-f",
        "lavfi",
        "-i",
        f"testsrc2=size=160x18:rate=5:duration={seconds}",
        "-filter_complex",
        "[0][1]overlay=0:72",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-an",
        str(path),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)


def generate_demo_sounds(
    folder: Path,
    *,
    seconds: float = 10.0,
    sample_rate: int = 32_000,
    seed: int = 7,
    videos: bool = True,
) -> dict[str, list[str]]:
    """Writes the demo WAVs (and video hints) into `folder`; returns name -> label ids."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    labels = {}
    for name, (generate, mids, colour) in DEMO_SOUNDS.items():
        write_wav(folder / name, generate(rng, sample_rate, seconds), sample_rate)
        if videos:
            write_video_hint(folder / f"{Path(name).stem}.mp4", colour, seconds)
        labels[name] = mids
    return labels
