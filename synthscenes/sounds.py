"""The sound synthesizer: everyday sounds (beeps, a siren, speech-like babble, a dog, birds,
a telephone, knocks, a horn, hammering, clapping, thunder, rain, wind, an engine, running
water, a ticking clock) rendered from a random generator, with no recordings needed.

Every renderer has the signature ``render(rng, sr, seconds, count)`` and returns a float64
array of ``round(seconds * sr)`` samples at an arbitrary level (callers set the loudness);
``count`` is the number of bursts for repeated sounds (barks, beeps, rings) and is ignored
by continuous ones. SynthScenes mixes these into scenes, and the offline demo
(``curation.synth``) writes them as single clips.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

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


def _formants(centres: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A vowel's gain: a Gaussian peak per formant, wider at higher centres, and each
    formant weaker than the one before."""
    return lambda f: sum(
        np.exp(-0.5 * ((f - c) / (60 + 0.06 * c)) ** 2) / (i + 1) for i, c in enumerate(centres)
    )


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


def add_at(out: np.ndarray, start: int, sound: np.ndarray) -> None:
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


def beep(pitch: tuple[float, float]) -> Render:
    def render(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
        n = round(seconds * sr)
        out = np.zeros(n)
        freq = rng.uniform(*pitch)
        length = int(rng.uniform(0.12, 0.25) * sr)
        t = np.arange(length) / sr
        tone = np.sin(2 * np.pi * freq * t) + 0.15 * np.sin(2 * np.pi * 2 * freq * t)
        tone *= _ramp(length, sr)
        for start in _bursts(count, n, sr, rng):
            add_at(out, start, tone)
        return out

    return render


def siren(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
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


def rain(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    hiss = _shape(rng.standard_normal(n), sr, _highpass(rng.uniform(800, 2000)))
    drops = np.zeros(n)
    positions = rng.integers(0, n, size=int(rng.uniform(30, 90) * seconds))
    drops[positions] = rng.uniform(0.5, 3.0, positions.size)
    kernel = rng.standard_normal(int(0.004 * sr)) * _decay(int(0.004 * sr), sr, 0.001)
    drops = np.convolve(drops, kernel, mode="same")
    return (0.6 * hiss + drops) * _ramp(n, sr, 0.3, 0.3)


def wind(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    noise = _shape(rng.standard_normal(n), sr, _lowpass(rng.uniform(250, 500)))
    gusts = 0.25 + _slow_noise(rng, n, sr, rng.uniform(0.4, 1.0)) ** 2 * 1.5
    howl_centre = rng.uniform(350, 700)
    howl = _shape(rng.standard_normal(n), sr, _band(howl_centre, 40.0))
    return (noise + 0.5 * howl * gusts) * gusts * _ramp(n, sr, 0.5, 0.5)


def ticking(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
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
        add_at(out, start, click)
    return out


def engine(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
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


def speech(f0_range: tuple[float, float], formant_scale: float) -> Render:
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
                voiced = _shape(source, sr, _formants(formants))
                envelope = np.sin(np.pi * np.arange(length) / length) ** 0.7
                if rng.random() < 0.35:  # a consonant's hiss at the onset
                    hiss_len = int(0.04 * sr)
                    hiss = _shape(rng.standard_normal(hiss_len), sr, _band(5000, 1500))
                    voiced[:hiss_len] += 0.3 * hiss * np.std(voiced)
                add_at(out, pos, voiced * envelope)
                pos += length
            pos += int(rng.uniform(0.08, 0.4) * sr)  # pause between words
        return out * _ramp(n, sr, 0.01, 0.05)

    return render


def bark(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    pitch0 = rng.uniform(350, 650)
    for start in _bursts(count, n, sr, rng):
        length = int(rng.uniform(0.12, 0.22) * sr)
        t = np.arange(length) / sr
        pitch = pitch0 * rng.uniform(0.9, 1.1) * (1 - 0.4 * t / t[-1])
        phase = 2 * np.pi * np.cumsum(pitch) / sr
        bark = sum(np.sin(k * phase) / k for k in range(1, 7)) + 0.5 * rng.standard_normal(length)
        add_at(out, start, bark * _ramp(length, sr, 0.01, 0.1) * _decay(length, sr, 0.12))
    return out


def chirps(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    low, high = rng.uniform(2500, 3500), rng.uniform(4000, 6000)
    for start in np.sort(rng.uniform(0, max(seconds - 0.15, 0.01), size=int(6 * seconds) + 1)):
        length = int(rng.uniform(0.04, 0.1) * sr)
        freq = np.linspace(low, high, length)
        if rng.random() < 0.5:
            freq = freq[::-1]
        chirp = np.sin(2 * np.pi * np.cumsum(freq) / sr) * _ramp(length, sr, 0.01, 0.02)
        add_at(out, int(start * sr), chirp)
    return out


def telephone(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    ring = int(min(1.4, seconds / count * 0.7) * sr)
    t = np.arange(ring) / sr
    tone = np.sin(2 * np.pi * 440 * t) + np.sin(2 * np.pi * 480 * t)
    tone *= 0.6 + 0.4 * np.sign(np.sin(2 * np.pi * 20 * t))  # the bell's 20 Hz strikes
    for start in _bursts(count, n, sr, rng):
        add_at(out, start, tone * _ramp(ring, sr, 0.01, 0.03))
    return out


def knock(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    freq = rng.uniform(110, 220)
    length = int(0.12 * sr)
    t = np.arange(length) / sr
    thump = np.sin(2 * np.pi * freq * t) * _decay(length, sr, 0.025)
    thump[: int(0.003 * sr)] += rng.standard_normal(int(0.003 * sr))
    for start in _bursts(count, n, sr, rng):
        add_at(out, start, thump * rng.uniform(0.8, 1.0))
    return out


def horn(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
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
        add_at(out, start, tone * _ramp(length, sr, 0.02, 0.04))
    return out


def hammer(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
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
        add_at(out, start, strike * rng.uniform(0.8, 1.0))
    return out


def clapping(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    out = np.zeros(n)
    centre = rng.uniform(1200, 2200)
    length = int(0.03 * sr)
    for start in _bursts(count, n, sr, rng):
        clap = _shape(rng.standard_normal(length), sr, _band(centre, 800.0))
        add_at(out, start, clap * _decay(length, sr, 0.006))
    return out


def thunder(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    rumble = _shape(rng.standard_normal(n), sr, _lowpass(rng.uniform(120, 250)))
    crack = _shape(rng.standard_normal(n), sr, _lowpass(2000.0)) * _decay(n, sr, 0.15)
    envelope = _decay(n, sr, seconds / 3) * (0.6 + 0.8 * _slow_noise(rng, n, sr, 3.0))
    return (rumble * envelope * 3 + crack) * _ramp(n, sr, 0.02, 0.3)


def water(rng: np.random.Generator, sr: int, seconds: float, count: int) -> np.ndarray:
    n = round(seconds * sr)
    hiss = _shape(rng.standard_normal(n), sr, _band(rng.uniform(1500, 3000), 1200.0))
    out = 0.5 * hiss
    for start in rng.integers(0, max(1, n - int(0.03 * sr)), size=int(40 * seconds)):
        length = int(rng.uniform(0.01, 0.03) * sr)
        freq = np.linspace(rng.uniform(500, 1200), rng.uniform(1300, 2500), length)
        bubble = np.sin(2 * np.pi * np.cumsum(freq) / sr) * _decay(length, sr, 0.008)
        add_at(out, int(start), 0.8 * bubble)
    return out * _ramp(n, sr, 0.1, 0.1)


def far_away(signal: np.ndarray, sr: int, rng: np.random.Generator) -> np.ndarray:
    """Far away: duller (low-pass) and reverberant (exponentially decaying noise tail)."""
    dull = _shape(signal, sr, _lowpass(1200.0))
    tail = int(0.5 * sr)
    impulse = rng.standard_normal(tail) * _decay(tail, sr, 0.12) * 0.04
    impulse[0] = 1.0
    size = 1 << math.ceil(math.log2(dull.size + tail))
    wet = np.fft.irfft(np.fft.rfft(dull, size) * np.fft.rfft(impulse, size), size)
    return wet[: dull.size]
