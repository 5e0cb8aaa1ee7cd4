"""Hostile media files, built at test time: what an attacker would put in an upload."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path
from typing import Protocol

import numpy as np

RATE = 8_000
_FFMPEG_LAVFI = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i"]


class Liar(Protocol):
    def __call__(self, path: Path, *, claims: float = ..., holds: float = ...) -> Path: ...


def server_secret(path: Path, seconds: float = 2.0) -> Path:
    """A file that lives on the server (another project's audio, say) as an MP3: a format
    the HLS demuxer accepts as a segment."""
    subprocess.run(
        [*_FFMPEG_LAVFI, f"sine=frequency=1234:duration={seconds}", str(path)],
        check=True,
    )
    return path


def hls_playlist(path: Path, segment: Path) -> Path:
    """An HLS playlist (named as the caller likes, say "rain.wav") whose one segment is a
    local file addressed by file:// URL."""
    path.write_text(
        "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:2.0,\n"
        f"file://{segment.resolve()}\n#EXT-X-ENDLIST\n"
    )
    return path


def concat_list(path: Path, segment: Path) -> Path:
    """An ffconcat list naming a local file: ffmpeg recognises it by its first line."""
    path.write_text(f"ffconcat version 1.0\nfile '{segment.resolve()}'\n")
    return path


def _pcm(seconds: float) -> bytes:
    t = np.arange(int(RATE * seconds))
    return (np.sin(2 * np.pi * 440 * t / RATE) * 8000).astype("<i2").tobytes()


def _chunk(tag: bytes, body: bytes) -> bytes:
    return tag + struct.pack("<I", len(body)) + body


def wav_lying_about_duration(path: Path, *, claims: float = 1.0, holds: float = 600.0) -> Path:
    """A WAV whose header claims `claims` seconds, followed by `holds` more seconds of
    samples that ffmpeg still decodes: after the first data chunk comes an "SMV0" chunk
    (an unknown version stops ffmpeg's header scan, so the duration is the first chunk's)
    and a second data chunk that the sample reader finds and plays."""
    fmt = struct.pack("<HHIIHH", 1, 1, RATE, RATE * 2, 2, 16)
    body = (
        b"WAVE"
        + _chunk(b"fmt ", fmt)
        + _chunk(b"data", _pcm(claims))
        + struct.pack("<4sI", b"SMV0", 0)
        + _chunk(b"data", _pcm(holds))
    )
    path.write_bytes(_chunk(b"RIFF", body))
    return path


def flac_lying_about_duration(path: Path, *, claims: float = 1.0, holds: float = 600.0) -> Path:
    """A FLAC file of `holds` seconds whose STREAMINFO claims `claims` seconds."""
    subprocess.run(
        [*_FFMPEG_LAVFI, f"sine=frequency=300:duration={holds}", "-ar", str(RATE), str(path)],
        check=True,
    )
    data = bytearray(path.read_bytes())
    # STREAMINFO follows "fLaC" and a 4-byte block header; its total-samples field is the
    # low 4 bits of body byte 13 and bytes 14..17
    body = 8
    claimed = int(RATE * claims)
    data[body + 13] = (data[body + 13] & 0xF0) | ((claimed >> 32) & 0x0F)
    data[body + 14 : body + 18] = (claimed & 0xFFFFFFFF).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    return path
