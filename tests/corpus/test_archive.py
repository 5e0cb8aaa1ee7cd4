"""The streamed zip writer of export snapshots, and the check that decides whether a stored
clip file can go into an audio snapshot."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from corpus.archive import ArchiveWriter
from corpus.services.snapshot_audio import wav_problem
from tests.corpus.conftest import wav_bytes


class _OneWayFile(io.RawIOBase):
    """An output that can only be appended to, as a pipe or an upload stream."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.data += b
        return len(b)


def test_members_stream_into_an_unseekable_output_as_a_valid_zip(tmp_path: Path) -> None:
    out = _OneWayFile()
    archive = ArchiveWriter(out)  # type: ignore[arg-type]
    audio = wav_bytes(np.zeros(3200, dtype=np.int16))
    chunks = [audio[:1000], audio[1000:]]

    archive.add_chunks(
        "train/a.wav", iter(chunks), size=len(audio), deflate=False, copy_to=tmp_path
    )
    card = b"# card\n"
    archive.add_bytes("README.md", card)
    archive.add_bytes("SHA256SUMS", archive.sha256sums())
    digest = archive.close()

    data = bytes(out.data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert archive.size == len(data)
    with zipfile.ZipFile(io.BytesIO(data)) as read:
        assert read.testzip() is None
        assert read.read("train/a.wav") == audio
        assert read.getinfo("train/a.wav").compress_type == zipfile.ZIP_STORED
        assert read.read("SHA256SUMS").decode() == (
            f"{hashlib.sha256(audio).hexdigest()}  train/a.wav\n"
            f"{hashlib.sha256(card).hexdigest()}  README.md\n"
        )
    assert (tmp_path / "train" / "a.wav").read_bytes() == audio


@pytest.mark.parametrize("path", ["../escape.wav", "/etc/passwd", "a/./b.wav", ""])
def test_a_member_path_must_stay_inside_the_archive(path: str) -> None:
    with (
        ArchiveWriter(_OneWayFile()) as archive,  # type: ignore[arg-type]
        pytest.raises(ValueError, match="is not a relative path inside the archive"),
    ):
        archive.add_bytes(path, b"x")


def _wav(frames: int) -> bytes:
    return wav_bytes(np.zeros(frames, dtype=np.int16))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (_wav(100), ""),
        (b"", "the audio file is empty"),
        (b"ID3\x04 an mp3", "the audio file is not a WAV file"),
        (_wav(1000)[:500], "the audio file is truncated: its header says 2,044 bytes, it has 500"),
        # a writer that could not seek back leaves the size unknown; that is no fault
        (_wav(100)[:4] + b"\xff\xff\xff\xff" + _wav(100)[8:], ""),
    ],
    ids=["wav", "empty", "mp3", "truncated", "size-unknown"],
)
def test_a_stored_file_is_checked_before_it_goes_in(data: bytes, problem: str) -> None:
    assert wav_problem(data[:1024], len(data)) == problem
