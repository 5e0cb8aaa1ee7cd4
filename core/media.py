"""Streaming stored media to members, with HTTP Range support.

Browsers seek in <audio> and <video> with Range requests; without a 206 answer Chrome
cannot jump to a point of the clip (the waveform's click-to-seek) and Safari refuses to
play at all. Files are read through Django's storage API so the same code serves the
filesystem and S3-compatible storage.

MEDIA_SERVING picks who sends a file's bytes once Django has said who may have them:
Django itself ("django", the default: a whole file goes out through the WSGI server's
file wrapper, which gunicorn sends with sendfile(2), a range through Python), or the
proxy in front, told by a header: nginx's X-Accel-Redirect to MEDIA_ACCEL_PREFIX + the
file's name ("x-accel-redirect"), or Apache's and lighttpd's X-Sendfile with the file's
path ("x-sendfile"). The proxy then answers Range requests itself. Files not on the local
filesystem (S3) always go through Django.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase

CHUNK_BYTES = 64 * 1024
# One range per request is all media elements send; multipart/byteranges is not worth it.
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass(frozen=True)
class ByteRange:
    """The bytes `first` to `last` (inclusive) of a file of `size` bytes, as answered."""

    first: int
    last: int
    size: int

    @property
    def whole(self) -> bool:
        return self.first == 0 and self.last == self.size - 1


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """The inclusive (first, last) byte a Range header asks for, or None when it is not
    one satisfiable range of this file."""
    match = _RANGE.match(header.strip())
    if not match or size == 0:
        return None
    first_text, last_text = match.groups()
    if not first_text and not last_text:
        return None
    if not first_text:  # "bytes=-500": the last 500 bytes
        length = int(last_text)
        if length == 0:
            return None
        return max(size - length, 0), size - 1
    first = int(first_text)
    last = int(last_text) if last_text else size - 1
    if first >= size or last < first:
        return None
    return first, min(last, size - 1)


def _read_range(handle: Any, first: int, last: int) -> Iterator[bytes]:
    try:
        handle.seek(first)
        remaining = last - first + 1
        while remaining > 0:
            chunk = handle.read(min(CHUNK_BYTES, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            yield chunk
    finally:
        handle.close()


def media_response(
    request: HttpRequest,
    field_file: Any,
    *,
    missing: str,
    on_served: Callable[[ByteRange], None] | None = None,
) -> HttpResponseBase:
    """A stored file for a member: the whole file (200) or the requested byte range (206).

    404 with ``missing`` when the row has no file or the file is gone from storage; 416
    when the range lies outside the file. Responses are private: never in a shared cache.
    ``on_served`` is called with the bytes the answer carries (by Django or, told by a
    header, by the proxy) before it is returned.
    """
    if not field_file:
        raise Http404(missing)
    try:
        size = field_file.size
    except (FileNotFoundError, OSError):
        raise Http404(missing) from None
    content_type = mimetypes.guess_type(field_file.name)[0] or "application/octet-stream"
    # RFC 9110: a server ignores Range units it does not know; only bytes exist in practice
    range_header = request.headers.get("Range", "")
    byte_range = ByteRange(0, size - 1, size)
    asked_range = range_header.startswith("bytes=")
    if asked_range:
        asked = _byte_range(range_header, size)
        if asked is None:
            refused = HttpResponse(status=416)
            refused["Content-Range"] = f"bytes */{size}"
            refused["Accept-Ranges"] = "bytes"
            return refused
        byte_range = ByteRange(*asked, size)
    response: HttpResponseBase = _proxy_response(field_file, content_type) or _django_response(
        field_file, content_type, byte_range, missing=missing, partial=asked_range
    )
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, max-age=3600"
    if on_served is not None and size > 0:
        on_served(byte_range)
    return response


def _proxy_response(field_file: Any, content_type: str) -> HttpResponse | None:
    """An empty answer telling the proxy in front to send the file (MEDIA_SERVING), or
    None when Django sends it: the default, or a file with no local path."""
    serving = settings.MEDIA_SERVING
    if serving == "django":
        return None
    try:
        path = field_file.path
    except NotImplementedError:  # not on this filesystem (S3)
        return None
    response = HttpResponse(content_type=content_type)
    if serving == "x-accel-redirect":
        response["X-Accel-Redirect"] = settings.MEDIA_ACCEL_PREFIX + quote(field_file.name)
    else:
        response["X-Sendfile"] = path
    return response


def _django_response(
    field_file: Any, content_type: str, byte_range: ByteRange, *, missing: str, partial: bool
) -> HttpResponseBase:
    try:
        handle = field_file.open("rb")
    except (FileNotFoundError, OSError):
        raise Http404(missing) from None
    if not partial:
        # the WSGI server's file wrapper: gunicorn sends it with sendfile(2)
        whole = FileResponse(handle, content_type=content_type)
        whole["Content-Length"] = str(byte_range.size)
        return whole
    first, last = byte_range.first, byte_range.last
    response = StreamingHttpResponse(
        _read_range(handle, first, last), status=206, content_type=content_type
    )
    response["Content-Range"] = f"bytes {first}-{last}/{byte_range.size}"
    response["Content-Length"] = str(last - first + 1)
    return response
