"""How ffmpeg and ffprobe open a media file that may come from a stranger.

A file handed to ffmpeg may be an upload, a downloaded section or a clip's stored video, so
ffmpeg reads it as one local file in one of the container formats clips come in: a playlist
(HLS, concat) named ".wav" or ".mp4" would otherwise make ffmpeg open other files on this
server, or URLs, and put their sound or frames into a clip or its features.

Standard library only: curation.media and curation.fetch use it, and so does
modeling.ml.video, which never imports Django (ARCHITECTURE.md), so this module must not
either.
"""

from __future__ import annotations

import re
from pathlib import Path

# ffmpeg demuxers allowed to read a file: those of the audio files an archive may hold
# (curation.archives.AUDIO_SUFFIXES: WAV, FLAC, MP3, Ogg/Opus, MP4/M4A, AAC, WebM) and of
# what yt-dlp downloads and the fetch stores (Matroska/WebM, MP4). Never hls, concat or
# other playlists.
INPUT_FORMATS = ("wav", "flac", "mp3", "ogg", "mov", "aac", "matroska")

_REFUSED_FORMAT = re.compile(r"\[(\w+) @ [^]]*\] Format not on whitelist")


def input_args(path: Path | str) -> list[str]:
    """ffmpeg/ffprobe options that open `path` as one local media file: the file protocol
    only (a name with a colon is not taken for a protocol) and only INPUT_FORMATS."""
    return [
        "-protocol_whitelist",
        "file",
        "-format_whitelist",
        ",".join(INPUT_FORMATS),
        "-i",
        f"file:{path}",
    ]


def refused_format(stderr: str) -> str | None:
    """The format ffmpeg found and refused to open because it is not one of INPUT_FORMATS
    ("concat", "hls", ...), read from its stderr; None when it refused none."""
    refused = _REFUSED_FORMAT.search(stderr)
    return refused.group(1) if refused else None
