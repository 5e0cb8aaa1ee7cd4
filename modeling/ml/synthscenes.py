"""SynthScenes: deterministic 10 s scenes of synthetic sound events with AudioCaps-style
captions, so captioners can be trained and evaluated offline.

A scene is planned from `(seed, index)` alone: one to three foreground events (beeps of two
pitches, a siren sweep, speech-like formant babble from a man or a woman, dog barks, bird
chirps, a telephone, knocks, a car horn, hammering, clapping, thunder) in sequence or at
the same time, sometimes over a background (rain, wind, an idling engine, running water, a
ticking clock); loudness, distance, repetition counts and order vary. Each event type maps
to real AudioSet labels (mids from the ontology), so word hints and label-based models work.

Captions are generated from the event list in AudioCaps' style: present tense, no "there
is", sentence case, no final period, order words ("followed by", "then", "before") for
sequences and "while", "as", "with" for overlaps, and loudness / distance / count words.
Sequences appear in both orders ("A siren wails followed by a dog barking" and the reverse)
and beeps differ only in pitch, so a model has to attend to time and frequency.

Audio and captions come from separate random streams: the waveform of scene i does not
depend on how many captions are asked for, and the first k captions of a scene are the same
whatever n >= k is requested.

Every scene also has a short low-resolution video (``render_video``), planned from a fourth
random stream so the audio and captions are unchanged by it: each foreground event type has
its own coloured shape (``VISUALS``), drawn in one cell of a 3 x 3 grid while the event sounds
(bigger when loud, smaller when distant); a background sound tints the whole frame half of
the time. By design the video is only partly informative, as real video hints are: a quarter
of the sounding events are off-screen, and a third of the scenes show a silent distractor, a
shape whose sound is never heard. Where it is on screen the video disambiguates what audio
alone finds hard (the two beeps differ only in pitch, the two voices in f0 and formants, but
their shapes differ); elsewhere it is redundant or misleading.
"""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

SCENE_SECONDS = 10.0
SAMPLE_RATE = 32_000

Render = Callable[[np.random.Generator, int, float, int], np.ndarray]

# signal helpers ------------------------------------------------------------------------------


def _shape(signal: np.ndarray, sr: int, gain: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Filters `signal` by multiplying its spectrum with `gain(frequencies)`."""
    size = 1 << max(1, math.ceil(math.log2(signal.size)))  # pocketfft is slow on odd sizes
    spectrum = np.fft.rfft(signal, size)
    spectrum *= gain(np.fft.rfftfreq(size, 1.0 / sr))
    return np.fft.irfft(spectrum, n=size)[: signal.size]


def _lowpass(cutoff: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda f: 1.0 / (1.0 + (f / cutoff) ** 2)


def _highpass(cutoff: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda f: (f / cutoff) ** 2 / (1.0 + (f / cutoff) ** 2)


def _band(centre: float, width: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda f: np.exp(-0.5 * ((f - centre) / width) ** 2)


def _ramp(n: int, sr: int, attack: float = 0.005, release: float = 0.01) -> np.ndarray:
    env = np.ones(n)
    a, r = min(n // 2, int(attack * sr)), min(n // 2, int(release * sr))
    if a:
        env[:a] = np.linspace(0.0, 1.0, a)
    if r:
        env[n - r :] = np.linspace(1.0, 0.0, r)
    return env


def _decay(n: int, sr: int, tau: float) -> np.ndarray:
    return np.exp(-np.arange(n) / (tau * sr))


def _place(out: np.ndarray, start: int, sound: np.ndarray) -> None:
    end = min(out.size, start + sound.size)
    if end > start:
        out[start:end] += sound[: end - start]


def _slow_noise(rng: np.random.Generator, n: int, sr: int, rate: float) -> np.ndarray:
    """A smooth random curve in [0, 1] changing about `rate` times a second."""
    points = max(2, int(n / sr * rate) + 2)
    knots = rng.uniform(0.0, 1.0, points)
    return np.interp(np.linspace(0, points - 1, n), np.arange(points), knots)


def _bursts(count: int, n: int, sr: int, rng: np.random.Generator) -> list[int]:
    """`count` start positions spread evenly over n samples with a little jitter."""
    period = n / count
    jitter = 0.1 * period
    return [max(0, int(i * period + rng.uniform(0, jitter))) for i in range(count)]


# event sounds: render(rng, sr, seconds, count) -> float array of round(seconds * sr) samples


def _beep(pitch: tuple[float, float]) -> Render:
    def render(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
        n = round(seconds * sr)
        out = np.zeros(n)
        freq = rng.uniform(*pitch)
        length = int(rng.uniform(0.12, 0.25) * sr)
        t = np.arange(length) / sr
        tone = np.sin(2 * np.pi * freq * t) + 0.15 * np.sin(2 * np.pi * 2 * freq * t)
        tone *= _ramp(length, sr)
        for start in _bursts(count, n, sr, rng):
            _place(out, start, tone)
        return out

    return render


def _siren(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    t = np.arange(n) / sr
    centre, depth = rng.uniform(750, 1000), rng.uniform(250, 450)
    period = rng.uniform(1.2, 3.0)
    if rng.random() < 0.5:  # wail: slow sinusoidal sweep
        freq = centre + depth * np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi))
    else:  # yelp: fast upward sweeps
        freq = centre - depth + 2 * depth * ((t / (period / 4)) % 1.0)
    phase = 2 * np.pi * np.cumsum(freq) / sr
    wave = np.sin(phase) + 0.3 * np.sin(2 * phase) + 0.1 * np.sin(3 * phase)
    return wave * _ramp(n, sr, 0.1, 0.2)


def _rain(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    hiss = _shape(rng.standard_normal(n), sr, _highpass(rng.uniform(800, 2000)))
    drops = np.zeros(n)
    positions = rng.integers(0, n, size=int(rng.uniform(30, 90) * seconds))
    drops[positions] = rng.uniform(0.5, 3.0, positions.size)
    kernel = rng.standard_normal(int(0.004 * sr)) * _decay(int(0.004 * sr), sr, 0.001)
    drops = np.convolve(drops, kernel, mode="same")
    return (0.6 * hiss + drops) * _ramp(n, sr, 0.3, 0.3)


def _wind(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    noise = _shape(rng.standard_normal(n), sr, _lowpass(rng.uniform(250, 500)))
    gusts = 0.25 + _slow_noise(rng, n, sr, rng.uniform(0.4, 1.0)) ** 2 * 1.5
    howl_centre = rng.uniform(350, 700)
    howl = _shape(rng.standard_normal(n), sr, _band(howl_centre, 40.0))
    return (noise + 0.5 * howl * gusts) * gusts * _ramp(n, sr, 0.5, 0.5)


def _ticking(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    rate = rng.choice([2.0, 3.0, 4.0])
    length = int(0.025 * sr)
    t = np.arange(length) / sr
    pitches = rng.uniform(1800, 3500, size=2)  # tick and tock differ a little
    for i, start in enumerate(np.arange(0, n - length, sr / rate).astype(int)):
        # a wooden knock (short noise) exciting a small metal resonance
        ring = np.sin(2 * np.pi * pitches[i % 2] * t) + 0.5 * np.sin(
            2 * np.pi * 2.3 * pitches[i % 2] * t
        )
        click = ring * _decay(length, sr, 0.004)
        click[: int(0.001 * sr)] += rng.standard_normal(int(0.001 * sr))
        _place(out, start, click)
    return out


def _engine(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    base = rng.uniform(25, 45) * (1 + 0.03 * (_slow_noise(rng, n, sr, 0.5) - 0.5))
    phase = 2 * np.pi * np.cumsum(base) / sr
    rumble = sum(np.sin(k * phase + rng.uniform(0, 6)) / k for k in range(1, 12))
    firing = 0.6 + 0.4 * np.sin(phase / 2)
    noise = _shape(rng.standard_normal(n), sr, _lowpass(300.0))
    return (rumble * firing + 0.5 * noise) * _ramp(n, sr, 0.3, 0.3)


# vowel formants (F1, F2, F3) in Hz for an adult male; a woman's are scaled by 1.17
_VOWELS = np.array(
    [[730, 1090, 2440], [530, 1840, 2480], [270, 2290, 3010], [570, 840, 2410], [300, 870, 2240]]
)


def _speech(f0_range: tuple[float, float], formant_scale: float) -> Render:
    def render(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
        n = round(seconds * sr)
        out = np.zeros(n)
        f0_mean = rng.uniform(*f0_range)
        pos = 0
        while pos < n:
            syllables = int(rng.integers(2, 6))  # one "word"
            for _ in range(syllables):
                length = int(rng.uniform(0.12, 0.28) * sr)
                if pos + length > n:
                    break
                t = np.arange(length) / sr
                glide = rng.uniform(-0.15, 0.15)
                f0 = f0_mean * (1 + glide * t / t[-1]) * rng.uniform(0.92, 1.08)
                phase = 2 * np.pi * np.cumsum(f0) / sr
                source = 2.0 * ((phase / (2 * np.pi)) % 1.0) - 1.0  # glottal sawtooth
                formants = _VOWELS[rng.integers(0, len(_VOWELS))] * formant_scale
                voiced = _shape(
                    source,
                    sr,
                    lambda f, fm=formants: sum(
                        np.exp(-0.5 * ((f - c) / (60 + 0.06 * c)) ** 2) / (i + 1)
                        for i, c in enumerate(fm)
                    ),
                )
                envelope = np.sin(np.pi * np.arange(length) / length) ** 0.7
                if rng.random() < 0.35:  # a consonant's hiss at the onset
                    hiss_len = int(0.04 * sr)
                    hiss = _shape(rng.standard_normal(hiss_len), sr, _band(5000, 1500))
                    voiced[:hiss_len] += 0.3 * hiss * np.std(voiced)
                _place(out, pos, voiced * envelope)
                pos += length
            pos += int(rng.uniform(0.08, 0.4) * sr)  # pause between words
        return out * _ramp(n, sr, 0.01, 0.05)

    return render


def _bark(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    pitch0 = rng.uniform(350, 650)
    for start in _bursts(count, n, sr, rng):
        length = int(rng.uniform(0.12, 0.22) * sr)
        t = np.arange(length) / sr
        pitch = pitch0 * rng.uniform(0.9, 1.1) * (1 - 0.4 * t / t[-1])
        phase = 2 * np.pi * np.cumsum(pitch) / sr
        bark = sum(np.sin(k * phase) / k for k in range(1, 7)) + 0.5 * rng.standard_normal(length)
        _place(out, start, bark * _ramp(length, sr, 0.01, 0.1) * _decay(length, sr, 0.12))
    return out


def _chirps(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    low, high = rng.uniform(2500, 3500), rng.uniform(4000, 6000)
    for start in np.sort(rng.uniform(0, max(seconds - 0.15, 0.01), size=int(6 * seconds) + 1)):
        length = int(rng.uniform(0.04, 0.1) * sr)
        freq = np.linspace(low, high, length)
        if rng.random() < 0.5:
            freq = freq[::-1]
        chirp = np.sin(2 * np.pi * np.cumsum(freq) / sr) * _ramp(length, sr, 0.01, 0.02)
        _place(out, int(start * sr), chirp)
    return out


def _telephone(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    ring = int(min(1.4, seconds / count * 0.7) * sr)
    t = np.arange(ring) / sr
    tone = np.sin(2 * np.pi * 440 * t) + np.sin(2 * np.pi * 480 * t)
    tone *= 0.6 + 0.4 * np.sign(np.sin(2 * np.pi * 20 * t))  # the bell's 20 Hz strikes
    for start in _bursts(count, n, sr, rng):
        _place(out, start, tone * _ramp(ring, sr, 0.01, 0.03))
    return out


def _knock(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    freq = rng.uniform(110, 220)
    length = int(0.12 * sr)
    t = np.arange(length) / sr
    thump = np.sin(2 * np.pi * freq * t) * _decay(length, sr, 0.025)
    thump[: int(0.003 * sr)] += rng.standard_normal(int(0.003 * sr))
    for start in _bursts(count, n, sr, rng):
        _place(out, start, thump * rng.uniform(0.8, 1.0))
    return out


def _horn(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    low = rng.uniform(350, 450)
    high = low * rng.uniform(1.18, 1.3)
    length = int(min(0.8, seconds / count * 0.75) * sr)
    t = np.arange(length) / sr
    tone = sum(
        (np.sin(2 * np.pi * k * low * t) + np.sin(2 * np.pi * k * high * t)) / k
        for k in (1, 3, 5, 7)
    )
    for start in _bursts(count, n, sr, rng):
        _place(out, start, tone * _ramp(length, sr, 0.02, 0.04))
    return out


def _hammer(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    base = rng.uniform(700, 1400)
    length = int(0.3 * sr)
    t = np.arange(length) / sr
    strike = sum(
        np.sin(2 * np.pi * base * ratio * t) * _decay(length, sr, tau) / (i + 1)
        for i, (ratio, tau) in enumerate(((1.0, 0.08), (2.76, 0.05), (5.4, 0.03), (8.9, 0.02)))
    )
    strike[: int(0.002 * sr)] += 2 * rng.standard_normal(int(0.002 * sr))
    for start in _bursts(count, n, sr, rng):
        _place(out, start, strike * rng.uniform(0.8, 1.0))
    return out


def _clapping(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    centre = rng.uniform(1200, 2200)
    length = int(0.03 * sr)
    for start in _bursts(count, n, sr, rng):
        clap = _shape(rng.standard_normal(length), sr, _band(centre, 800.0))
        _place(out, start, clap * _decay(length, sr, 0.006))
    return out


def _thunder(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    rumble = _shape(rng.standard_normal(n), sr, _lowpass(rng.uniform(120, 250)))
    crack = _shape(rng.standard_normal(n), sr, _lowpass(2000.0)) * _decay(n, sr, 0.15)
    envelope = _decay(n, sr, seconds / 3) * (0.6 + 0.8 * _slow_noise(rng, n, sr, 3.0))
    return (rumble * envelope * 3 + crack) * _ramp(n, sr, 0.02, 0.3)


def _water(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    hiss = _shape(rng.standard_normal(n), sr, _band(rng.uniform(1500, 3000), 1200.0))
    out = 0.5 * hiss
    for start in rng.integers(0, max(1, n - int(0.03 * sr)), size=int(40 * seconds)):
        length = int(rng.uniform(0.01, 0.03) * sr)
        freq = np.linspace(rng.uniform(500, 1200), rng.uniform(1300, 2500), length)
        bubble = np.sin(2 * np.pi * np.cumsum(freq) / sr) * _decay(length, sr, 0.008)
        _place(out, int(start), 0.8 * bubble)
    return out * _ramp(n, sr, 0.1, 0.1)


# event types ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventType:
    key: str  # stable id, stored with each scene's events
    mids: tuple[str, ...]  # AudioSet label ids (ontology.json), most specific first
    subjects: tuple[str, ...]  # caption subjects ("a dog", "rain")
    verbs: tuple[tuple[str, str], ...]  # (third person present, -ing form) phrases
    cue: str  # regex matching every caption phrase of this type (tests use it)
    render: Render
    countable: bool  # repeated bursts (barks, beeps) counted in captions
    period: tuple[float, float] = (0.5, 0.8)  # seconds per burst when countable
    seconds: tuple[float, float] = (1.5, 5.0)  # duration range when not countable
    background: bool = False  # may fill a whole scene, quietly, behind other events


EVENT_TYPES: dict[str, EventType] = {
    e.key: e
    for e in (
        EventType(
            "beep_high",
            ("/m/02fs_r",),
            ("a machine", "a device", "an electronic device"),
            (
                ("beeps at a high pitch", "beeping at a high pitch"),
                ("gives high-pitched beeps", "giving high-pitched beeps"),
                ("emits a high beep", "emitting a high beep"),
            ),
            r"\bhigh",
            _beep((1800.0, 3000.0)),
            countable=True,
            period=(0.4, 0.8),
        ),
        EventType(
            "beep_low",
            ("/m/02fs_r",),
            ("a machine", "a device", "an electronic device"),
            (
                ("beeps at a low pitch", "beeping at a low pitch"),
                ("gives low-pitched beeps", "giving low-pitched beeps"),
                ("emits a low beep", "emitting a low beep"),
            ),
            r"\blow",
            _beep((350.0, 650.0)),
            countable=True,
            period=(0.4, 0.8),
        ),
        EventType(
            "siren",
            ("/m/03kmc9",),
            ("a siren", "an emergency siren"),
            (("wails", "wailing"), ("blares", "blaring"), ("sounds", "sounding")),
            r"\bsiren",
            _siren,
            countable=False,
            seconds=(2.0, 6.0),
        ),
        EventType(
            "speech_man",
            ("/m/05zppz", "/m/09x0r"),
            ("a man", "a male voice"),
            (("speaks", "speaking"), ("talks", "talking")),
            r"\b(man|male)\b",
            _speech((95.0, 140.0), 1.0),
            countable=False,
            seconds=(1.5, 5.0),
        ),
        EventType(
            "speech_woman",
            ("/m/02zsn", "/m/09x0r"),
            ("a woman", "a female voice"),
            (("speaks", "speaking"), ("talks", "talking")),
            r"\b(woman|female)\b",
            _speech((185.0, 250.0), 1.17),
            countable=False,
            seconds=(1.5, 5.0),
        ),
        EventType(
            "dog",
            ("/m/05tny_", "/m/0bt9lr"),
            ("a dog", "a small dog"),
            (("barks", "barking"),),
            r"\bdog",
            _bark,
            countable=True,
            period=(0.45, 0.8),
        ),
        EventType(
            "bird",
            ("/m/07pggtn", "/m/015p6"),
            ("a bird", "a small bird"),
            (("chirps", "chirping"), ("tweets", "tweeting"), ("sings", "singing")),
            r"\bbird",
            _chirps,
            countable=False,
            seconds=(1.0, 4.0),
        ),
        EventType(
            "telephone",
            ("/m/07pp8cl", "/m/07cx4"),
            ("a telephone", "a phone"),
            (("rings", "ringing"),),
            r"\b(tele)?phone",
            _telephone,
            countable=True,
            period=(1.6, 2.2),
        ),
        EventType(
            "knock",
            ("/m/07r4wb8",),
            ("someone", "a person"),
            (("knocks on a door", "knocking on a door"), ("knocks", "knocking")),
            r"\bknock",
            _knock,
            countable=True,
            period=(0.22, 0.35),
        ),
        EventType(
            "horn",
            ("/m/0912c9",),
            ("a car horn", "a vehicle horn"),
            (("honks", "honking"), ("sounds", "sounding")),
            r"\bhorn",
            _horn,
            countable=True,
            period=(0.6, 1.0),
        ),
        EventType(
            "hammer",
            ("/m/03l9g",),
            ("someone", "a person"),
            (("hammers", "hammering"), ("hammers on metal", "hammering on metal")),
            r"\bhammer",
            _hammer,
            countable=True,
            period=(0.4, 0.7),
        ),
        EventType(
            "clapping",
            ("/m/0l15bq",),
            ("someone", "a person"),
            (("claps", "clapping"), ("claps their hands", "clapping their hands")),
            r"\bclap",
            _clapping,
            countable=True,
            period=(0.25, 0.4),
        ),
        EventType(
            "thunder",
            ("/m/0ngt1",),
            ("thunder",),
            (("rumbles", "rumbling"), ("roars", "roaring"), ("crashes", "crashing")),
            r"\bthunder",
            _thunder,
            countable=False,
            seconds=(1.5, 4.0),
        ),
        EventType(
            "rain",
            ("/m/06mb1",),
            ("rain",),
            (
                ("falls", "falling"),
                ("pours down", "pouring down"),
                ("patters on a roof", "pattering on a roof"),
            ),
            r"\brain",
            _rain,
            countable=False,
            seconds=(2.0, 6.0),
            background=True,
        ),
        EventType(
            "wind",
            ("/m/03m9d0z",),
            ("wind", "a strong wind"),
            (("blows", "blowing"), ("gusts", "gusting"), ("howls", "howling")),
            r"\bwind\b",
            _wind,
            countable=False,
            seconds=(2.0, 6.0),
            background=True,
        ),
        EventType(
            "engine",
            ("/m/02mk9", "/m/07pb8fc"),
            ("an engine", "a car engine", "a vehicle engine"),
            (("idles", "idling"), ("hums", "humming"), ("runs", "running")),
            r"\bengine",
            _engine,
            countable=False,
            seconds=(1.5, 6.0),
            background=True,
        ),
        EventType(
            "water",
            ("/m/02jz0l", "/m/0838f"),
            ("water",),
            (
                ("runs from a tap", "running from a tap"),
                ("flows from a faucet", "flowing from a faucet"),
                ("trickles from a tap", "trickling from a tap"),
            ),
            r"\bwater",
            _water,
            countable=False,
            seconds=(1.5, 5.0),
            background=True,
        ),
        EventType(
            "ticking",
            ("/m/07qjznt", "/m/01x3z"),
            ("a clock",),
            (("ticks", "ticking"), ("ticks steadily", "ticking steadily")),
            r"\btick",
            _ticking,
            countable=False,
            seconds=(1.5, 5.0),
            background=True,
        ),
    )
}

FOREGROUND = tuple(k for k, e in EVENT_TYPES.items() if not e.background)
BACKGROUND = tuple(k for k, e in EVENT_TYPES.items() if e.background)

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


# scenes ---------------------------------------------------------------------------------------


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


LABEL_NAMES = {
    "/m/02fs_r": "Beep, bleep",
    "/m/03kmc9": "Siren",
    "/m/05zppz": "Male speech, man speaking",
    "/m/02zsn": "Female speech, woman speaking",
    "/m/09x0r": "Speech",
    "/m/05tny_": "Bark",
    "/m/0bt9lr": "Dog",
    "/m/07pggtn": "Chirp, tweet",
    "/m/015p6": "Bird",
    "/m/07pp8cl": "Telephone bell ringing",
    "/m/07cx4": "Telephone",
    "/m/07r4wb8": "Knock",
    "/m/0912c9": "Vehicle horn, car horn, honking",
    "/m/03l9g": "Hammer",
    "/m/0l15bq": "Clapping",
    "/m/0ngt1": "Thunder",
    "/m/06mb1": "Rain",
    "/m/03m9d0z": "Wind",
    "/m/02mk9": "Engine",
    "/m/07pb8fc": "Idling",
    "/m/02jz0l": "Water tap, faucet",
    "/m/0838f": "Water",
    "/m/07qjznt": "Tick",
    "/m/01x3z": "Clock",
}


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


def _distance(signal: np.ndarray, sr: int, rng: np.random.Generator) -> np.ndarray:
    """Far away: duller (low-pass) and reverberant (exponentially decaying noise tail)."""
    dull = _shape(signal, sr, _lowpass(1200.0))
    tail = int(0.5 * sr)
    impulse = rng.standard_normal(tail) * _decay(tail, sr, 0.12) * 0.04
    impulse[0] = 1.0
    size = 1 << math.ceil(math.log2(dull.size + tail))
    wet = np.fft.irfft(np.fft.rfft(dull, size) * np.fft.rfft(impulse, size), size)
    return wet[: dull.size]


def render_scene(
    rng: np.random.Generator, events: list[SceneEvent], sample_rate: int, seconds: float
) -> np.ndarray:
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
            sound = _distance(sound, sample_rate, rng)
        _place(mix, round(event.onset * sample_rate), sound)
    mix += 1e-4 * rng.standard_normal(n)  # a faint noise floor, as in real recordings
    peak = float(np.abs(mix).max())
    if peak > 0.95:
        mix *= 0.95 / peak
    return mix.astype(np.float32)


# captions -------------------------------------------------------------------------------------

_COUNT_WORDS = {2: "twice", 3: "three times"}


def _verb_phrase(event: SceneEvent, rng: np.random.Generator, form: int) -> str:
    """Verb, then manner ("loudly"), then count ("twice"), then place ("in the distance"):
    "barks loudly twice", "knocks softly and repeatedly", "rings twice in the distance"."""
    kind = EVENT_TYPES[event.type]
    phrase = kind.verbs[rng.integers(0, len(kind.verbs))][form]
    count = ""
    if kind.countable:
        if event.count in _COUNT_WORDS:
            count = _COUNT_WORDS[event.count]
        elif event.count >= 4:
            count = str(rng.choice(["repeatedly", "several times", "many times"]))
        elif rng.random() < 0.3:
            count = "once"
    manner = place = ""
    if event.distant:
        place = str(rng.choice(["in the distance", "far away", "from a distance"]))
    elif event.level == "loud" and rng.random() < 0.75:
        manner = "loudly"
    elif event.level == "quiet" and rng.random() < 0.75:
        manner = str(rng.choice(["quietly", "softly", "faintly"]))
    if manner and count == "repeatedly":
        manner, count = f"{manner} and repeatedly", ""
    return " ".join(w for w in (phrase, manner, count, place) if w)


def _clause(event: SceneEvent, rng: np.random.Generator, form: int = 0) -> str:
    """form 0: "a dog barks twice"; form 1: "a dog barking twice"."""
    kind = EVENT_TYPES[event.type]
    subject = kind.subjects[rng.integers(0, len(kind.subjects))]
    return f"{subject} {_verb_phrase(event, rng, form)}"


def _background_clause(event: SceneEvent, rng: np.random.Generator, form: int) -> str:
    clause = _clause(event, rng, form)
    return clause + str(rng.choice([" in the background", " in the background", ""]))


def caption(structure: str, events: list[SceneEvent], rng: np.random.Generator) -> str:
    """One AudioCaps-style caption of a planned scene."""
    fg = [e for e in events if e.level != "background"]
    bg = [e for e in events if e.level == "background"]
    choice = int(rng.integers(0, 4))
    if structure == "single":
        text = _clause(fg[0], rng, 1 if choice == 0 else 0)
    elif structure == "overlap":
        a, b = (fg[0], fg[1]) if rng.random() < 0.5 else (fg[1], fg[0])
        text = [
            f"{_clause(a, rng)} while {_clause(b, rng)}",
            f"{_clause(a, rng)} as {_clause(b, rng)}",
            f"{_clause(a, rng)} with {_clause(b, rng, 1)}",
            f"{_clause(a, rng)} and {_clause(b, rng)} at the same time",
        ][choice]
    elif structure == "background":
        f, b = fg[0], bg[0]
        text = [
            f"{_clause(f, rng)} while {_background_clause(b, rng, 0)}",
            f"{_clause(b, rng)} as {_clause(f, rng)}",
            f"{_clause(f, rng)} with {_background_clause(b, rng, 1)}",
            f"{_clause(f, rng)} over {_clause(b, rng, 1)}",
        ][choice]
    else:
        text = _sequence(fg, rng, choice)
        if structure == "sequence_background":
            b = bg[0]
            if rng.random() < 0.5:
                text = f"{text} while {_background_clause(b, rng, 0)}"
            else:
                text = f"{_clause(b, rng)} as {text}"
    return text[0].upper() + text[1:]


def _sequence(fg: list[SceneEvent], rng: np.random.Generator, choice: int) -> str:
    if len(fg) == 2:
        a, b = fg
        return [
            f"{_clause(a, rng)} followed by {_clause(b, rng, 1)}",
            f"{_clause(a, rng)}, then {_clause(b, rng)}",
            f"{_clause(a, rng)} and then {_clause(b, rng)}",
            f"{_clause(a, rng)} before {_clause(b, rng)}",
        ][choice]
    a, b, c = fg
    return [
        f"{_clause(a, rng)} followed by {_clause(b, rng, 1)} and then {_clause(c, rng, 1)}",
        f"{_clause(a, rng)}, then {_clause(b, rng)}, and then {_clause(c, rng)}",
        f"{_clause(a, rng)} and then {_clause(b, rng)} followed by {_clause(c, rng, 1)}",
        f"{_clause(a, rng)} before {_clause(b, rng)} and then {_clause(c, rng)}",
    ][choice]


def captions_for(
    structure: str, events: list[SceneEvent], rng: np.random.Generator, n: int
) -> list[str]:
    """`n` different paraphrases (fewer only if the templates cannot make that many)."""
    out: list[str] = []
    for _ in range(50 * n):
        text = caption(structure, events, rng)
        if text not in out:
            out.append(text)
            if len(out) == n:
                break
    return out


# video ------------------------------------------------------------------------------------------

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


def _shape_mask(shape: str, size: int, radius: float) -> np.ndarray:
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
            block[_shape_mask(shape, cell, visual.scale * cell / 2)] = colour
    return frames


def write_video(path: Path | str, frames: np.ndarray, fps: float = VIDEO_FPS) -> Path:
    """An H.264 MP4 of (frames, H, W, 3) uint8 RGB frames (a few kB for a scene)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _, height, width, _ = frames.shape
    command = [
        *("ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24"),
        *("-s", f"{width}x{height}", "-r", str(fps), "-i", "pipe:0"),
        *("-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-pix_fmt", "yuv444p"),
        str(path),
    ]
    done = subprocess.run(
        command, input=np.ascontiguousarray(frames).tobytes(), capture_output=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"ffmpeg could not write {path}: {done.stderr.decode().strip()}")
    return path


def write_scene_video(folder: Path | str, scene: Scene) -> Path:
    """Writes `<folder>/<scene.name>.mp4` and returns its path."""
    return write_video(Path(folder) / f"{scene.name}.mp4", render_video(scene))


# generation and files ---------------------------------------------------------------------------


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
    for index in range(start, start + count):
        yield generate_scene(
            seed, index, sample_rate=sample_rate, seconds=seconds, n_captions=n_captions,
            event_weights=event_weights,
        )  # fmt: skip


def write_wav(path: Path | str, waveform: np.ndarray, sample_rate: int) -> Path:
    """16-bit PCM mono WAV; samples are clipped to [-1, 1]."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.clip(waveform, -1.0, 1.0), sample_rate, subtype="PCM_16")
    return path


def write_scene(folder: Path | str, scene: Scene) -> Path:
    """Writes `<folder>/<scene.name>.wav` and returns its path."""
    return write_wav(Path(folder) / f"{scene.name}.wav", scene.waveform, scene.sample_rate)


def mentions_in_order(text: str, events: list[SceneEvent]) -> bool:
    """Whether `text` mentions the foreground `events` in their time order (by each type's
    cue word)."""
    positions = []
    for event in events:
        found = re.search(EVENT_TYPES[event.type].cue, text, flags=re.IGNORECASE)
        if found is None:
            return False
        positions.append(found.start())
    return positions == sorted(positions)
