"""ffmpeg/ffprobe helpers. No Django models here: paths in, facts out.

Every file handed to ffmpeg here may come from a stranger (an uploaded archive, a
downloaded section), so ffmpeg reads it as one local file in one of the container formats
clips come in (`input_args`, from curation.ffmpeg_input: a playlist would otherwise make
ffmpeg open other files on this server, or URLs, and put their sound into a clip). Header
durations are claims, not facts: what a clip lasts is counted from its decoded samples,
and decoding stops at a hard limit however long the file says it is.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from django.conf import settings

from curation.ffmpeg_input import input_args, refused_format

AUDIO_SAMPLE_RATE = 32_000  # ACT's rate; features resample from here if a model wants less
PEAK_BUCKETS = 400
WAV_HEADER_BYTES = 44


class MediaError(Exception):
    """A media file that cannot be used; the message names the file and the reason."""


@dataclass(frozen=True)
class MediaInfo:
    duration_seconds: float
    has_audio: bool
    has_video: bool
    audio_codec: str


def failure_reason(path: Path, stderr: str, default: str) -> str:
    """What to tell the uploader about ffmpeg's complaint: a refused format by name, else
    ffmpeg's last line (without the server's folder names)."""
    refused = refused_format(stderr)
    if refused:
        return (
            f"a {refused} file, which Earmark does not read; send WAV, FLAC, MP3, "
            "Ogg, Opus, MP4, M4A, AAC or WebM audio"
        )
    lines = stderr.strip().splitlines()
    if not lines:
        return default
    return lines[-1].replace(f"file:{path}", path.name).replace(str(path), path.name)


def probe(path: Path) -> MediaInfo:
    """The container's own account of `path` (its duration is the header's claim)."""
    command = [
        settings.FFPROBE_BINARY,
        "-v",
        "error",
        "-print_format",
        "json",
        "-show_format",
        "-show_streams",
        *input_args(path),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise MediaError(f"{settings.FFPROBE_BINARY} is not installed") from None
    if done.returncode != 0:
        reason = failure_reason(path, done.stderr, "unreadable")
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
    seconds: float,
    start: float = 0.0,
    sample_rate: int = AUDIO_SAMPLE_RATE,
) -> float:
    """Decodes at most `seconds` of `src` from `start` to 16-bit mono WAV at `sample_rate`
    (AUDIO_SAMPLE_RATE unless told); returns how long the decoded audio lasts.

    The limit holds whatever the file claims: `-t` stops the output by its timestamps and
    `-fs` by its size, which timestamps cannot bend.
    """
    max_bytes = WAV_HEADER_BYTES + 2 * math.ceil(seconds * sample_rate)
    command = [
        settings.FFMPEG_BINARY,
        "-nostdin",
        "-v",
        "error",
        "-y",
        "-ss",
        f"{start:.3f}",
        *input_args(src),
        "-t",
        f"{seconds:.3f}",
        "-vn",
        "-ac",
        "1",
        "-ar",
        str(sample_rate),
        "-c:a",
        "pcm_s16le",
        "-fs",
        str(max_bytes),
        str(dst),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 or not dst.exists() or dst.stat().st_size <= WAV_HEADER_BYTES:
        reason = failure_reason(src, done.stderr, "no output")
        raise MediaError(f"{src.name}: ffmpeg could not decode the audio ({reason})")
    return decoded_seconds(dst)


def decoded_seconds(wav: Path) -> float:
    """How long a WAV written by decode_audio lasts, counted from its samples."""
    try:
        info = sf.info(str(wav))
    except RuntimeError as exc:  # soundfile.LibsndfileError
        raise MediaError(f"{wav.name}: the decoded audio is unreadable ({exc})") from None
    return float(info.frames / info.samplerate)


def waveform_peaks(wav: Path, buckets: int = PEAK_BUCKETS) -> list[float]:
    """Max |amplitude| in each of `buckets` equal slices, scaled to 0..1 for drawing."""
    samples, _ = sf.read(str(wav), dtype="float32", always_2d=True)
    mono = np.abs(samples).max(axis=1)
    if mono.size == 0:
        return []
    edges = np.linspace(0, mono.size, num=min(buckets, mono.size) + 1, dtype=np.int64)
    peaks = np.maximum.reduceat(mono, edges[:-1])
    return [round(float(p), 3) for p in np.clip(peaks, 0.0, 1.0)]


def stored_audio_problem(handle: Any, *, size: int, expected_seconds: float | None) -> str | None:
    """Why a stored clip's audio (an open binary file of `size` bytes: the WAV the fetch
    or an import wrote) cannot be played, as a predicate ("is empty (0 bytes)"), or None.
    Reads the header only, never the samples: empty, not audio soundfile can open, no
    samples, or fewer seconds than were measured when it was stored (`expected_seconds`,
    counted from the samples then: a file cut short keeps its header, not its tail)."""
    if size == 0:
        return "is empty (0 bytes)"
    try:
        info = sf.info(handle)
    except sf.LibsndfileError as exc:
        return f"is not readable audio ({exc.error_string})"
    except RuntimeError as exc:  # soundfile's other open failures
        return f"is not readable audio ({exc})"
    if info.frames <= 0 or info.samplerate <= 0:
        return "holds no samples"
    held = info.frames / info.samplerate
    if expected_seconds and held < expected_seconds - max(0.05, 0.01 * expected_seconds):
        return f"holds {held:.2f} s of audio, not the {expected_seconds:.2f} s stored"
    return None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
