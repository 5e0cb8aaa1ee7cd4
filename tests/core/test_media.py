"""Stored media is streamed with HTTP Range support, so players can seek."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.http import Http404
from django.test import RequestFactory

from core.media import media_response

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
