"""Stored media is streamed with HTTP Range support, so players can seek."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404
from django.test import RequestFactory

from core.media import ByteRange, media_response

BODY = bytes(range(256)) * 4  # 1,024 distinct-ish bytes


class StoredFile:
    """The slice of FieldFile that media_response uses."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __bool__(self) -> bool:
        return bool(self.name)

    def open(self, mode: str = "rb") -> Any:
        return default_storage.open(self.name, mode)

    @property
    def size(self) -> int:
        return default_storage.size(self.name)

    @property
    def path(self) -> str:
        return default_storage.path(self.name)


@pytest.fixture
def stored(settings: Any, tmp_path: Any) -> StoredFile:
    settings.MEDIA_ROOT = tmp_path
    name = default_storage.save("clips/audio/tone.wav", ContentFile(BODY))
    return StoredFile(name)


def fetch(stored: StoredFile, range_header: str | None = None) -> Any:
    headers = {"Range": range_header} if range_header else {}
    request = RequestFactory().get("/media", headers=headers)
    return media_response(request, stored, missing="no audio")


def body_of(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def test_whole_file_says_ranges_are_accepted(stored: StoredFile) -> None:
    response = fetch(stored)
    assert response.status_code == 200
    assert response["Accept-Ranges"] == "bytes"
    assert response["Content-Length"] == str(len(BODY))
    assert response["Content-Type"] == "audio/x-wav"
    assert body_of(response) == BODY


def test_a_closed_range_returns_exactly_those_bytes(stored: StoredFile) -> None:
    response = fetch(stored, "bytes=100-199")
    assert response.status_code == 206
    assert response["Content-Range"] == f"bytes 100-199/{len(BODY)}"
    assert response["Content-Length"] == "100"
    assert body_of(response) == BODY[100:200]


def test_an_open_range_runs_to_the_end(stored: StoredFile) -> None:
    response = fetch(stored, "bytes=1000-")
    assert response.status_code == 206
    assert body_of(response) == BODY[1000:]


def test_a_suffix_range_returns_the_last_bytes(stored: StoredFile) -> None:
    response = fetch(stored, "bytes=-24")
    assert response["Content-Range"] == f"bytes 1000-1023/{len(BODY)}"
    assert body_of(response) == BODY[-24:]


def test_a_range_past_the_end_is_clipped_to_the_file(stored: StoredFile) -> None:
    response = fetch(stored, "bytes=1020-5000")
    assert response["Content-Range"] == f"bytes 1020-1023/{len(BODY)}"
    assert body_of(response) == BODY[1020:]


@pytest.mark.parametrize("header", ["bytes=2000-", "bytes=50-10", "bytes=-0", "bytes=0-1,5-6"])
def test_an_unsatisfiable_range_is_416_with_the_size(stored: StoredFile, header: str) -> None:
    response = fetch(stored, header)
    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{len(BODY)}"


def test_an_unknown_range_unit_is_ignored(stored: StoredFile) -> None:
    response = fetch(stored, "lines=1-2")
    assert response.status_code == 200
    assert body_of(response) == BODY


def test_a_missing_file_is_404_with_the_reason(stored: StoredFile) -> None:
    default_storage.delete(stored.name)
    with pytest.raises(Http404, match="no audio"):
        fetch(stored)


def test_a_row_without_a_file_is_404(stored: StoredFile) -> None:
    with pytest.raises(Http404, match="no audio"):
        fetch(StoredFile(""))


def test_media_is_never_shared_cached(stored: StoredFile) -> None:
    assert fetch(stored, "bytes=0-1")["Cache-Control"].startswith("private")


# What the answer carries, and who sends it ---------------------------------------------


def _served(stored: StoredFile, **headers: str) -> tuple[Any, list[ByteRange]]:
    parts: list[ByteRange] = []
    request = RequestFactory().get("/", headers=headers)
    response = media_response(request, stored, missing="gone", on_served=parts.append)
    return response, parts


def test_the_bytes_answered_are_reported(stored: StoredFile) -> None:
    assert _served(stored)[1] == [ByteRange(0, len(BODY) - 1, len(BODY))]
    assert _served(stored, Range="bytes=10-19")[1] == [ByteRange(10, 19, len(BODY))]
    assert _served(stored, Range="bytes=5000-")[1] == []  # 416: nothing served


def test_by_default_django_sends_a_whole_file_through_the_servers_file_wrapper(
    stored: StoredFile,
) -> None:
    response, _ = _served(stored)
    assert isinstance(response, FileResponse)  # gunicorn sends it with sendfile(2)
    assert response.file_to_stream is not None


def test_behind_nginx_the_proxy_is_told_to_send_the_file(stored: StoredFile, settings: Any) -> None:
    settings.MEDIA_SERVING = "x-accel-redirect"
    response, parts = _served(stored, Range="bytes=10-19")
    assert response.status_code == 200  # nginx answers the range itself
    assert response["X-Accel-Redirect"] == "/protected-media/clips/audio/tone.wav"
    assert response["Content-Type"] == "audio/x-wav"
    assert response.content == b""
    assert parts == [ByteRange(10, 19, len(BODY))]


def test_behind_apache_the_proxy_gets_the_files_path(stored: StoredFile, settings: Any) -> None:
    settings.MEDIA_SERVING = "x-sendfile"
    response, _ = _served(stored)
    assert response["X-Sendfile"] == default_storage.path(stored.name)
    assert response.content == b""
