"""Streaming stored media to members, with HTTP Range support.

Browsers seek in <audio> and <video> with Range requests; without a 206 answer Chrome
cannot jump to a point of the clip (the waveform's click-to-seek) and Safari refuses to
play at all. Files are read through Django's storage API so the same code serves the
filesystem and S3-compatible storage.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Iterator
from typing import Any

from django.http import FileResponse, Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase

CHUNK_BYTES = 64 * 1024
# One range per request is all media elements send; multipart/byteranges is not worth it.
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


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


def media_response(request: HttpRequest, field_file: Any, *, missing: str) -> HttpResponseBase:
    """A stored file for a member: the whole file (200) or the requested byte range (206).

    404 with ``missing`` when the row has no file or the file is gone from storage; 416
    when the range lies outside the file. Responses are private: never in a shared cache.
    """
    if not field_file:
        raise Http404(missing)
    try:
        handle = field_file.open("rb")
        size = field_file.size
    except (FileNotFoundError, OSError):
        raise Http404(missing) from None
    content_type = mimetypes.guess_type(field_file.name)[0] or "application/octet-stream"
    # RFC 9110: a server ignores Range units it does not know; only bytes exist in practice
    range_header = request.headers.get("Range", "")
    response: HttpResponseBase  # a 416, a streamed range or the whole file
    if range_header.startswith("bytes="):
        byte_range = _byte_range(range_header, size)
        if byte_range is None:
            handle.close()
            response = HttpResponse(status=416)
            response["Content-Range"] = f"bytes */{size}"
        else:
            first, last = byte_range
            response = StreamingHttpResponse(
                _read_range(handle, first, last), status=206, content_type=content_type
            )
            response["Content-Range"] = f"bytes {first}-{last}/{size}"
            response["Content-Length"] = str(last - first + 1)
    else:
        response = FileResponse(handle, content_type=content_type)
        response["Content-Length"] = str(size)
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, max-age=3600"
    return response
