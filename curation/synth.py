"""Synthetic everyday sounds for the offline demo and for tests: no downloads needed.

Each generator returns float32 mono samples in [-1, 1] at `sample_rate`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile as sf
from django.conf import settings

Generator = Callable[[np.random.Generator, int, float], np.ndarray]


def _envelope(n: int, attack: int, release: int) -> np.ndarray:
    env = np.ones(n, dtype=np.float32)
    env[:attack] = np.linspace(0, 1, attack)
    env[n - release :] = np.linspace(1, 0, release)
    return env


def dog_barks(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    out = np.zeros(int(sr * seconds), dtype=np.float32)
    for start in np.sort(rng.uniform(0.3, seconds - 0.6, size=5)):
        n = int(sr * rng.uniform(0.12, 0.22))
        t = np.arange(n) / sr
        pitch = rng.uniform(350, 550) * (1 - 0.4 * t / t[-1])
        phase = 2 * np.pi * np.cumsum(pitch) / sr
        bark = sum(np.sin(k * phase) / k for k in range(1, 6)) + 0.4 * rng.standard_normal(n)
        i = int(start * sr)
        out[i : i + n] += 0.35 * bark * _envelope(n, n // 10, n // 2)
    return out


def siren(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    t = np.arange(int(sr * seconds)) / sr
    freq = 900 + 350 * np.sin(2 * np.pi * t / rng.uniform(2.5, 4.0))
    swell = np.clip(t / seconds * 1.5, 0.2, 1.0)  # approaching
    return (0.4 * swell * np.sin(2 * np.pi * np.cumsum(freq) / sr)).astype(np.float32)


def rain(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    n = int(sr * seconds)
    noise = rng.standard_normal(n).astype(np.float32)
    hiss = np.convolve(noise, np.ones(8) / 8, mode="same") * 0.15
    for i in rng.integers(0, n - 400, size=int(25 * seconds)):
        hiss[i : i + 400] += 0.25 * rng.standard_normal(400) * np.exp(-np.arange(400) / 60)
    return hiss.astype(np.float32)


def engine_idling(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    t = np.arange(int(sr * seconds)) / sr
    base = rng.uniform(28, 36)
    rumble = sum(np.sin(2 * np.pi * k * base * t + rng.uniform(0, 6)) / k for k in range(1, 9))
    firing = 0.6 + 0.4 * np.sin(2 * np.pi * base / 2 * t)
    noise = 0.1 * rng.standard_normal(t.size)
    return (0.18 * (rumble * firing + noise)).astype(np.float32)


def bird_chirps(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    out = np.zeros(int(sr * seconds), dtype=np.float32)
    for start in rng.uniform(0, seconds - 0.2, size=18):
        n = int(sr * rng.uniform(0.05, 0.12))
        f = np.linspace(rng.uniform(2500, 3500), rng.uniform(4000, 5500), n)
        i = int(start * sr)
        out[i : i + n] += 0.3 * np.sin(2 * np.pi * np.cumsum(f) / sr) * _envelope(n, n // 5, n // 3)
    return out


def telephone_ringing(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    t = np.arange(int(sr * seconds)) / sr
    tone = np.sin(2 * np.pi * 440 * t) + np.sin(2 * np.pi * 480 * t)
    cadence = ((t % 4.0) < 2.0).astype(np.float32)  # 2 s on, 2 s off
    return (0.25 * tone * cadence).astype(np.float32)


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
    peak = float(np.abs(samples).max()) or 1.0
    sf.write(str(path), samples / max(peak, 1.0) * 0.9, sample_rate, subtype="PCM_16")


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
