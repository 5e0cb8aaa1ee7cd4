"""Fetching one clip's section: yt-dlp downloads it, ffmpeg makes the clip's media.

No Django models here: a YouTube id and times in, files and facts out. The services in
curation.services turn the outcome into clip state:

- `Unavailable` — the source says the video is gone (removed, private, 404, blocked in this
  country, age-gated). Retrying cannot help, so the clip is never fetched again.
- `FetchFailed` — anything that might succeed later: network trouble, rate limiting, a
  download cut short, output that fails verification. The clip keeps its remaining attempts.

yt-dlp can exit cleanly and leave a short or empty file, so nothing is trusted until
`fetch_section` has verified it: the audio decodes, lasts the section's length (within
DURATION_TOLERANCE_SECONDS) and is not empty. Near-silent audio is not an error — the clip
exists — but it is reported (`silent`) so curators can drop it.
"""

from __future__ import annotations

import json
import logging
import math
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from django.conf import settings

from curation import media
from curation.recipes import VIDEO_FEATURES_HEIGHTS

log = logging.getLogger(__name__)

# Best audio, with the smallest video that still makes a hint; single-file and audio-only
# sources (the generic extractor, videos whose picture was removed) fall through.
SOURCE_FORMAT = "bestaudio+worstvideo[height>=144]/bestaudio+worstvideo/best/bestaudio"
# A recipe's `video_features_height` asks for a second, sharper silent video that feature
# extraction reads instead of the hint. The source is then the smallest video at least
# that tall (or the tallest there is); the result is never scaled up. The heights allowed
# are curation.recipes.VIDEO_FEATURES_HEIGHTS.
VIDEO_FEATURES_CRF = 23  # x264's default quality: these frames feed a video encoder
DURATION_TOLERANCE_SECONDS = 0.5
# The video hint shows annotators what the scene looks like; it is not the data.
VIDEO_HINT_HEIGHT = 144
VIDEO_HINT_FPS = 10
VIDEO_HINT_MAX_BYTES = 200_000
VIDEO_HINT_MAXRATE_KBPS = (120, 60)  # a second, leaner try when the first comes out too big
# Below either level the audio is flagged silent: -60 dBFS RMS is far under room noise,
# and a -50 dBFS peak means nothing in the clip ever rose above it.
SILENCE_RMS_DBFS = -60.0
SILENCE_PEAK_DBFS = -50.0
SOCKET_TIMEOUT_SECONDS = 30
FFMPEG_TIMEOUT_SECONDS = 120


class FetchError(Exception):
    """A fetch that produced no clip; `reason` is what to show the curator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unavailable(FetchError):
    """The source no longer offers the video; retrying cannot help."""


class FetchFailed(FetchError):
    """The fetch may succeed if tried again later."""


@dataclass(frozen=True)
class FetchedClip:
    audio: Path  # mono 16-bit WAV at sample_rate
    video: Path | None  # the ≈144p hint; None when the source has no picture
    # the sharper video for features, when asked for and the source has a picture
    video_features: Path | None
    duration_seconds: float
    sample_rate: int
    peaks: list[float]
    sha256: str
    rms_dbfs: float
    peak_dbfs: float

    @property
    def silent(self) -> bool:
        return self.rms_dbfs < SILENCE_RMS_DBFS or self.peak_dbfs < SILENCE_PEAK_DBFS


def source_url(youtube_id: str) -> str:
    return settings.CLIP_SOURCE_URL_TEMPLATE.format(youtube_id=youtube_id)


class _Pacer:
    """Spaces download starts in this process at least `interval` seconds apart.

    Per process, because that is what a worker process controls; N media worker processes
    make at most N requests per interval. Threads in one process share the pace.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: float | None = None

    def wait(self, interval: float) -> None:
        with self._lock:
            if self._last is not None and interval > 0:
                delay = self._last + interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            self._last = time.monotonic()


pacer = _Pacer()


# Downloading ------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Checked before the "gone" patterns: YouTube's bot check and throttling pass, and
# "Requested format is not available" is about our format choice, not the video.
_TRANSIENT = re.compile(
    r"not a bot|HTTP Error (?:429|5\d\d)|Too Many Requests|timed? ?out|Temporary failure"
    r"|Connection (?:refused|reset|aborted)|Network is unreachable|Requested format",
    re.IGNORECASE,
)
_GONE = re.compile(
    r"HTTP Error (?:404|410)|Video unavailable|This video is unavailable|is not available"
    r"|no longer available|Private video|video is private|has been removed|been terminated"
    r"|copyright|blocked it|not made this video available|confirm your age|age.restricted"
    r"|inappropriate for some users|members.only|join this channel|video does not exist",
    re.IGNORECASE,
)


class _Capture:
    """yt-dlp's logger: keeps warnings and errors for the reason, prints nothing."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def debug(self, message: str) -> None:
        pass

    def info(self, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        self.lines.append(message)

    def error(self, message: str) -> None:
        if message.strip():
            self.lines.append(message)


def _clean(message: str) -> str:
    text = _ANSI.sub("", message).strip()
    text = re.sub(r"^ERROR:\s*", "", text)
    text = re.sub(r"\s*\(caused by .*\)$", "", text, flags=re.DOTALL)
    return text[:500] or "yt-dlp gave no reason"


def classify(message: str, cause: BaseException | None = None) -> FetchError:
    """Maps a yt-dlp error to Unavailable (the video is gone) or FetchFailed (try later)."""
    from yt_dlp.utils import GeoRestrictedError

    reason = _clean(message)
    if re.fullmatch(r"ffmpeg exited with code \d+", reason):
        reason = f"ffmpeg could not read the section from the source ({reason})"
    if _TRANSIENT.search(message):
        return FetchFailed(reason)
    if isinstance(cause, GeoRestrictedError) or _GONE.search(message):
        return Unavailable(reason)
    return FetchFailed(reason)


def source_format(video_features_height: int | None = None) -> str:
    """yt-dlp's format choice: the hint's smallest picture, or one tall enough for the
    features video (falling back to the tallest offered)."""
    if video_features_height is None:
        return SOURCE_FORMAT
    if video_features_height not in VIDEO_FEATURES_HEIGHTS:
        raise ValueError(
            f"video_features_height {video_features_height!r}: use one of "
            f"{', '.join(map(str, VIDEO_FEATURES_HEIGHTS))}, or none"
        )
    tall_enough = f"worstvideo[height>={video_features_height}]"
    return f"bestaudio+{tall_enough}/bestaudio+bestvideo/best/bestaudio"


def download_section(
    *,
    url: str,
    start: float,
    end: float,
    workdir: Path,
    video_features_height: int | None = None,
) -> Path:
    """Downloads [start, end) of the video at `url` into `workdir`; returns the file.

    yt-dlp hands sections to ffmpeg, which seeks with HTTP Range requests and re-encodes
    at the cut points (force_keyframes_at_cuts): a stream copy would start at the keyframe
    before `start`, putting sound from before the labelled segment into the clip.
    """
    import yt_dlp  # ~0.3 s to import; only fetching workers pay it
    from yt_dlp.utils import DownloadError, download_range_func

    capture = _Capture()
    options: dict[str, Any] = {
        "format": source_format(video_features_height),
        "merge_output_format": "mkv",  # holds any audio+video pair YouTube offers
        "download_ranges": download_range_func(None, [(start, end)]),
        "force_keyframes_at_cuts": True,
        "external_downloader_args": {
            # ffmpeg waits forever on a stalled connection unless told (microseconds)
            "ffmpeg_i": ["-rw_timeout", str(SOCKET_TIMEOUT_SECONDS * 1_000_000)],
            # the cut is an intermediate for the WAV and the 144p hint: encode the video
            # fast. Audio keeps ffmpeg's default bitrate: AAC at 192k cost 0.35 CPU s/clip.
            "ffmpeg_o": ["-preset", "ultrafast"],
        },
        "paths": {"home": str(workdir), "temp": str(workdir)},
        "outtmpl": "source.%(ext)s",
        "logger": capture,
        "quiet": True,
        "noprogress": True,
        "color": {"stdout": "never", "stderr": "never"},
        "cachedir": False,
        "noplaylist": True,
        "overwrites": True,
        # a failed clip is retried by the next fetch run, spaced out by then; hammering
        # the source now would only earn a rate limit
        "retries": 1,
        "fragment_retries": 1,
        "extractor_retries": 1,
        "socket_timeout": SOCKET_TIMEOUT_SECONDS,
    }
    if settings.FFMPEG_BINARY != "ffmpeg":
        options["ffmpeg_location"] = settings.FFMPEG_BINARY
    pacer.wait(settings.FETCH_RATE_LIMIT_SECONDS)
    try:
        with yt_dlp.YoutubeDL(options) as ydl:
            info = ydl.extract_info(url, download=True)
    except DownloadError as exc:
        cause = exc.exc_info[1] if exc.exc_info else None
        raise classify(str(exc.msg or exc), cause) from None
    if info is None:  # yt-dlp reports some errors only through the logger
        raise classify(capture.lines[-1] if capture.lines else "yt-dlp returned nothing")
    downloads = info.get("requested_downloads") or []
    paths = [Path(d["filepath"]) for d in downloads if d.get("filepath")]
    found = [p for p in paths if p.is_file()] or sorted(workdir.glob("source.*"))
    if not found:
        raise FetchFailed("yt-dlp finished but left no file")
    if found[0].stat().st_size == 0:
        raise FetchFailed("yt-dlp finished but the file is empty")
    return found[0]


# Making the clip's media ------------------------------------------------------------------


def loudness(wav: Path) -> tuple[float, float]:
    """(RMS, peak) of the file in dBFS; -inf for digital silence."""
    samples, _ = sf.read(str(wav), dtype="float32", always_2d=True)
    if samples.size == 0:
        return -math.inf, -math.inf
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    peak = float(np.abs(samples).max())

    def dbfs(level: float) -> float:
        return 20 * math.log10(level) if level > 0 else -math.inf

    return dbfs(rms), dbfs(peak)


def _encode_silent_h264(
    src: Path, dst: Path, *, seconds: float, video_filter: str, rate: list[str], what: str
) -> None:
    """Encodes the first `seconds` of src's first video stream as a silent H.264 MP4 that
    starts playing before it is fully loaded. Raises MediaError naming `what` when ffmpeg
    fails or writes nothing."""
    command = [
        settings.FFMPEG_BINARY,
        "-nostdin",
        "-v",
        "error",
        "-y",
        *media.input_args(src),
        "-t",
        f"{seconds:.3f}",
        "-an",
        "-sn",
        "-map",
        "0:v:0",
        "-vf",
        video_filter,
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        *rate,
        "-pix_fmt",
        "yuv420p",
        "-movflags",
        "+faststart",
        str(dst),
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=FFMPEG_TIMEOUT_SECONDS, check=False
    )
    if done.returncode != 0 or not dst.is_file() or dst.stat().st_size == 0:
        reason = media.failure_reason(src, done.stderr, "no output")
        raise media.MediaError(f"{src.name}: ffmpeg could not make the {what} ({reason})")


def make_video_hint(src: Path, dst: Path, *, seconds: float) -> Path | None:
    """A ≈144p H.264 MP4 without sound, at most VIDEO_HINT_MAX_BYTES; None if that cannot
    be had (the hint is optional, the audio is the clip)."""
    for maxrate in VIDEO_HINT_MAXRATE_KBPS:
        _encode_silent_h264(
            src,
            dst,
            seconds=seconds,
            # -2 keeps the width even, which yuv420p needs
            video_filter=f"fps={VIDEO_HINT_FPS},scale=-2:{VIDEO_HINT_HEIGHT}",
            rate=["-crf", "30", "-maxrate", f"{maxrate}k", "-bufsize", f"{maxrate * 2}k"],
            what="video hint",
        )
        if dst.stat().st_size <= VIDEO_HINT_MAX_BYTES:
            return dst
    log.warning("%s: video hint stays over %d bytes; storing none", src.name, VIDEO_HINT_MAX_BYTES)
    dst.unlink(missing_ok=True)
    return None


def make_video_features(src: Path, dst: Path, *, seconds: float, height: int) -> Path:
    """A silent H.264 MP4 at most `height` pixels tall (the source's own height when it is
    shorter), at the source's frame rate, verified to decode as a picture that lasts the
    section. Raises MediaError: unlike the hint, the recipe asked for this one."""
    _encode_silent_h264(
        src,
        dst,
        seconds=seconds,
        # never scale up; -2 and the trunc keep both sides even, which yuv420p needs
        video_filter=f"scale=-2:'trunc(min(ih,{height})/2)*2'",
        rate=["-crf", str(VIDEO_FEATURES_CRF)],
        what=f"{height}p video",
    )
    got_height, duration = _video_facts(dst)
    if not 0 < got_height <= height:
        raise media.MediaError(f"{dst.name}: {got_height}p, expected at most {height}p")
    if duration < seconds - DURATION_TOLERANCE_SECONDS:
        raise media.MediaError(
            f"{dst.name}: the {height}p video lasts {duration:.2f} s, expected {seconds:.2f} s"
        )
    return dst


def _video_facts(path: Path) -> tuple[int, float]:
    """(height, duration in seconds) of the first video stream, decoded to the end: a
    file whose frames are broken fails here rather than in feature extraction."""
    command = [
        settings.FFPROBE_BINARY,
        "-v",
        "error",
        "-select_streams",
        "v:0",
        "-count_frames",
        "-show_entries",
        "stream=height,nb_read_frames:format=duration",
        "-of",
        "json",
        *media.input_args(path),
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=FFMPEG_TIMEOUT_SECONDS, check=False
    )
    try:
        data = json.loads(done.stdout or "{}")
        stream = data["streams"][0]
        if done.returncode != 0 or int(stream.get("nb_read_frames", 0)) == 0:
            raise ValueError("no frames")
        return int(stream["height"]), float(data["format"]["duration"])
    except (KeyError, IndexError, ValueError) as exc:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else str(exc)
        raise media.MediaError(f"{path.name}: not a readable video ({reason})") from None


def process_download(
    src: Path,
    workdir: Path,
    *,
    expected_seconds: float,
    sample_rate: int = media.AUDIO_SAMPLE_RATE,
    video_features_height: int | None = None,
) -> FetchedClip:
    """Verifies a downloaded section and makes the WAV, the hint and the peaks from it."""
    try:
        info = media.probe(src)  # raises if there is no audio stream or no duration
        if info.duration_seconds < expected_seconds - DURATION_TOLERANCE_SECONDS:
            raise FetchFailed(
                f"downloaded section lasts {info.duration_seconds:.2f} s, "
                f"expected {expected_seconds:.2f} s (cut short?)"
            )
        wav = workdir / "audio.wav"
        duration = media.decode_audio(src, wav, seconds=expected_seconds, sample_rate=sample_rate)
        if abs(duration - expected_seconds) > DURATION_TOLERANCE_SECONDS:
            raise FetchFailed(
                f"decoded audio lasts {duration:.2f} s, expected {expected_seconds:.2f} s"
            )
        video = features = None
        if info.has_video:
            video = make_video_hint(src, workdir / "hint.mp4", seconds=expected_seconds)
            if video_features_height is not None:
                features = make_video_features(
                    src,
                    workdir / "features.mp4",
                    seconds=expected_seconds,
                    height=video_features_height,
                )
        rms, peak = loudness(wav)
        return FetchedClip(
            audio=wav,
            video=video,
            video_features=features,
            duration_seconds=duration,
            sample_rate=sample_rate,
            peaks=media.waveform_peaks(wav),
            sha256=media.sha256_of(wav),
            rms_dbfs=rms,
            peak_dbfs=peak,
        )
    except media.MediaError as exc:
        # a corrupt download is not proof the video is gone: the next attempt may be whole
        raise FetchFailed(str(exc)) from None


def fetch_section(
    *,
    youtube_id: str,
    start: float,
    end: float,
    workdir: Path,
    sample_rate: int = media.AUDIO_SAMPLE_RATE,
    video_features_height: int | None = None,
) -> FetchedClip:
    """Downloads and verifies one clip's section. Raises Unavailable or FetchFailed.
    The returned files live in `workdir`; the caller stores them and removes the folder.
    With `video_features_height`, also makes the sharper silent video for features."""
    src = download_section(
        url=source_url(youtube_id),
        start=start,
        end=end,
        workdir=workdir,
        video_features_height=video_features_height,
    )
    return process_download(
        src,
        workdir,
        expected_seconds=end - start,
        sample_rate=sample_rate,
        video_features_height=video_features_height,
    )
