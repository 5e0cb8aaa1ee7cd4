"""ffmpeg/ffprobe helpers. No Django models here: paths in, facts out."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
from django.conf import settings

AUDIO_SAMPLE_RATE = 32_000  # ACT's rate; features resample from here if a model wants less
PEAK_BUCKETS = 400


class MediaError(Exception):
    """A media file that cannot be used; the message names the file and the reason."""


@dataclass(frozen=True)
class MediaInfo:
    duration_seconds: float
    has_audio: bool
    has_video: bool
    audio_codec: str


def probe(path: Path) -> MediaInfo:
    command = [
        settings.FFPROBE_BINARY,
        "-v",
        "error",
        "-print_format",
        "json",
        "-show_format",
        "-show_streams",
        str(path),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise MediaError(f"{settings.FFPROBE_BINARY} is not installed") from None
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "unreadable"
        raise MediaError(f"{path.name}: not a readable media file ({reason})")
    data = json.loads(done.stdout or "{}")
    streams = data.get("streams", [])
    audio = [s for s in streams if s.get("codec_type") == "audio"]
    video = [s for s in streams if s.get("codec_type") == "video"]
    try:
        duration = float(data.get("format", {}).get("duration", "nan"))
    except ValueError:
        duration = float("nan")
    if not audio:
        raise MediaError(f"{path.name}: has no audio stream")
    if not np.isfinite(duration) or duration <= 0:
        raise MediaError(f"{path.name}: has no measurable duration")
    return MediaInfo(duration, True, bool(video), audio[0].get("codec_name", "?"))


def decode_audio(
    src: Path,
    dst: Path,
    *,
    start: float = 0.0,
    duration: float | None = None,
    sample_rate: int = AUDIO_SAMPLE_RATE,
) -> None:
    """Decodes `src` to 16-bit mono WAV at `sample_rate` (AUDIO_SAMPLE_RATE unless told)."""
    command = [settings.FFMPEG_BINARY, "-nostdin", "-v", "error", "-y", "-ss", f"{start:.3f}"]
    if duration is not None:
        command += ["-t", f"{duration:.3f}"]
    command += [
        "-i",
        str(src),
        "-vn",
        "-ac",
        "1",
        "-ar",
        str(sample_rate),
        "-c:a",
        "pcm_s16le",
        str(dst),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 or not dst.exists() or dst.stat().st_size <= 44:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output"
        raise MediaError(f"{src.name}: ffmpeg could not decode the audio ({reason})")


def waveform_peaks(wav: Path, buckets: int = PEAK_BUCKETS) -> list[float]:
    """Max |amplitude| in each of `buckets` equal slices, scaled to 0..1 for drawing."""
    samples, _ = sf.read(str(wav), dtype="float32", always_2d=True)
    mono = np.abs(samples).max(axis=1)
    if mono.size == 0:
        return []
    edges = np.linspace(0, mono.size, num=min(buckets, mono.size) + 1, dtype=np.int64)
    peaks = np.maximum.reduceat(mono, edges[:-1])
    return [round(float(p), 3) for p in np.clip(peaks, 0.0, 1.0)]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
