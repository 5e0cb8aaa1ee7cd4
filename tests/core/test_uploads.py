"""Uploads only where an upload is expected (core.uploads): a large multipart body to a
view that takes no file is refused from its Content-Length before a byte is read, and a
file part sent there is never kept in memory or spooled to disk."""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.test import Client

from core.uploads import takes_uploads

BOUNDARY = "earmarkboundary"
BODY_BYTES = 200 * 1024 * 1024


class LazyBody(io.RawIOBase):
    """A multipart body of BODY_BYTES made as it is read (never held whole): a username
    field, then a file part of zeros. `read_bytes` counts what was taken from it."""

    def __init__(self, size: int = BODY_BYTES) -> None:
        head = (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="username"\r\n\r\nann\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        tail = f"\r\n--{BOUNDARY}--\r\n".encode()
        self.parts: Iterator[bytes] = iter([head])
        self.head, self.tail = head, tail
        self.size = size
        self.zeros = size - len(head) - len(tail)
        self.read_bytes = 0
        self._position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        wanted = len(buffer)
        chunk = self._chunk(self._position, wanted)
        buffer[: len(chunk)] = chunk
        self._position += len(chunk)
        self.read_bytes += len(chunk)
        return len(chunk)

    def _chunk(self, at: int, wanted: int) -> bytes:
        head, zeros = len(self.head), self.zeros
        if at < head:
            return self.head[at : at + wanted]
        if at < head + zeros:
            return bytes(min(wanted, head + zeros - at))
        rest = at - head - zeros
        return self.tail[rest : rest + wanted]


def _post(path: str, body: LazyBody) -> Any:
    """The request through Django's WSGI handler, as gunicorn hands it over."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BufferedReader(body),
        "CONTENT_TYPE": f"multipart/form-data; boundary={BOUNDARY}",
        "CONTENT_LENGTH": str(body.size),
        # a CSRF cookie and no header: the middleware reads the form for the token
        "HTTP_COOKIE": "csrftoken=" + "a" * 32,
    }
    statuses: list[str] = []

    def start_response(status: str, headers: Any, *args: Any) -> Any:
        statuses.append(status)
        return lambda data: None

    chunks = WSGIHandler()(environ, start_response)
    b"".join(chunks)
    return statuses[0]


def _spooled() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("*.upload*")}


@pytest.mark.django_db
def test_a_200_mb_multipart_login_is_refused_before_its_body_is_read() -> None:
    before = _spooled()
    body = LazyBody()

    status = _post("/login/", body)

    assert status.startswith(("400", "413"))
    assert body.read_bytes < 1024 * 1024  # refused from its Content-Length
    assert _spooled() == before


@pytest.mark.django_db
def test_a_file_part_sent_to_a_page_without_uploads_is_dropped_unstored(
    settings: Any,
) -> None:
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024  # beyond this Django would spool to disk
    before = _spooled()
    body = LazyBody(size=2 * 1024 * 1024)  # under UPLOAD_MAX_BYTES: read, but not kept
    seen: list[Any] = []
    from django.core.files.uploadhandler import TemporaryFileUploadHandler

    original = TemporaryFileUploadHandler.new_file

    def spy(self: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(args)
        original(self, *args, **kwargs)

    TemporaryFileUploadHandler.new_file = spy  # type: ignore[method-assign]
    try:
        status = _post("/login/", body)
    finally:
        TemporaryFileUploadHandler.new_file = original  # type: ignore[method-assign]

    assert status.startswith(("200", "403"))  # the login form, or a CSRF refusal
    assert seen == []
    assert _spooled() == before


@pytest.mark.django_db
def test_pages_that_take_files_still_get_them(project: Any, alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    upload = io.BytesIO(b"[]")
    upload.name = "export.json"
    response = client.post(f"/projects/{project.slug}/active/labelstudio/import/", {"file": upload})
    assert response.status_code == 302
    messages = [str(m) for m in response.wsgi_request._messages]  # type: ignore[attr-defined]
    assert any("export.json" in m for m in messages), messages


def test_it_knows_which_api_operations_take_files(rf: Any) -> None:
    from django.urls import resolve

    request = rf.post("/api/projects/x/labelstudio/import")
    request.resolver_match = resolve("/api/projects/x/labelstudio/import")
    assert takes_uploads(request)
    request = rf.post("/api/work/claim")
    request.resolver_match = resolve("/api/work/claim")
    assert not takes_uploads(request)
