"""A local stand-in for YouTube: a threaded HTTP server on 127.0.0.1 serving generated media.

yt-dlp reaches it through CLIP_SOURCE_URL_TEMPLATE (`{url}/v/{youtube_id}.mp4`) and downloads
the section with ffmpeg, which seeks with HTTP Range requests — so, unlike
`python -m http.server`, this server answers them. Each YouTube id is a route: a media file,
a file cut short, an HTTP error, or bytes that are not media. Hits are counted per id, so a
test can prove a clip was not fetched again. Also used by benchmarks/fetch.py.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
SWITCH_SECONDS = 10.0  # make_mp4's tone rises from 440 Hz to 880 Hz here
_ROUTE = re.compile(r"^/v/([A-Za-z0-9_-]{11})\.mp4$")


@dataclass
class Route:
    """What the server answers for one YouTube id.

    `status` other than 200 answers with that HTTP error. `cut_at` serves only the first
    `cut_at` bytes of `path` as if they were the whole file (an upload that was cut short).
    """

    path: Path | None = None
    status: int = 200
    cut_at: int | None = None
    content_type: str = "video/mp4"

    def body(self) -> bytes:
        assert self.path is not None
        data = self.path.read_bytes()
        return data if self.cut_at is None else data[: self.cut_at]


class MediaServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes: dict[str, Route] = {}
        self.hits: Counter[str] = Counter()
        self.first_hit_at: dict[str, float] = {}  # time.monotonic() of each id's first request
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    @property
    def url_template(self) -> str:
        """The CLIP_SOURCE_URL_TEMPLATE that sends yt-dlp here."""
        return self.url + "/v/{youtube_id}.mp4"

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients (ffmpeg) drop connections mid-request; that is not a server fault

    def hit(self, youtube_id: str) -> None:
        with self._lock:
            self.hits[youtube_id] += 1
            self.first_hit_at.setdefault(youtube_id, time.monotonic())

    def reset(self) -> None:
        with self._lock:
            self.routes.clear()
            self.hits.clear()
            self.first_hit_at.clear()


class _Handler(BaseHTTPRequestHandler):
    server: MediaServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output clean

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def _answer(self, *, send_body: bool) -> None:
        match = _ROUTE.match(self.path.split("?", 1)[0])
        route = self.server.routes.get(match.group(1)) if match else None
        if match is None or route is None:
            self._error(404)
            return
        self.server.hit(match.group(1))
        if route.status != 200:
            self._error(route.status)
            return
        body = route.body()
        start, end = 0, len(body) - 1
        wanted = _RANGE.match(self.headers.get("Range", "").strip())
        if wanted and (wanted.group(1) or wanted.group(2)):
            if wanted.group(1):
                start = int(wanted.group(1))
                end = min(int(wanted.group(2)), end) if wanted.group(2) else end
            else:  # "bytes=-N": the last N bytes
                start = max(0, len(body) - int(wanted.group(2)))
            if start >= len(body) or start > end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Type", route.content_type)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        if send_body:
            # ffmpeg closes the connection once it has read what it needs
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body[start : end + 1])

    def _error(self, status: int) -> None:
        text = f"{status}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)


@contextmanager
def media_server() -> Iterator[MediaServer]:
    server = MediaServer()
    thread = threading.Thread(target=server.serve_forever, name="media-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def make_mp4(
    path: Path, *, seconds: float = 25.0, silent: bool = False, size: str = "320x240"
) -> Path:
    """A test clip: a tone (or digital silence) under a moving test pattern.
    `+faststart` puts the index first, so ffmpeg can seek into the section over HTTP."""
    # 440 Hz for the first 10 s, 880 Hz after: the pitch tells which section was cut
    audio = (
        "anullsrc=r=44100:cl=stereo"
        if silent
        else f"aevalsrc=0.5*sin(2*PI*if(lt(t\\,{SWITCH_SECONDS:g})\\,440\\,880)*t):s=44100"
    )
    command = [
        "ffmpeg",
        "-nostdin",
        "-v",
        "error",
        "-y",
        "-f",
        "lavfi",
        "-i",
        audio,
        "-f",
        "lavfi",
        "-i",
        f"testsrc=size={size}:rate=25",
        "-t",
        f"{seconds:g}",
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-pix_fmt",
        "yuv420p",
        "-c:a",
        "aac",
        "-b:a",
        "96k",
        "-movflags",
        "+faststart",
        str(path),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    return path
