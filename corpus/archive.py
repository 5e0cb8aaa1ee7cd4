"""A zip archive written as a stream, for export snapshots. No Django here.

Members go straight into the output (an open file, never a buffer of the whole archive),
each from chunks: a 6 GB export of WAV files holds one chunk in memory at a time. The output
is treated as unseekable, so zipfile writes each member's sizes and CRC after its data (a
data descriptor) instead of seeking back, and the archive's SHA-256 is computed as its bytes
go out, with no second read. WAV is stored (compressing PCM saves little and costs much
CPU); text is deflated. Every member's SHA-256 and size is kept for SHA256SUMS.

Every byte is hashed twice (its member's digest, the archive's): on the 2-core dev machine
that is 1.1 ms of CPU per MB against 1.5 ms for reading and writing it. hashlib releases
the GIL on large buffers, so each digest runs on a thread of its own, fed through a short
queue, and the copy does not wait for the hashing where a core is free.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import threading
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from core.text import checksum_line

CHUNK_BYTES = 1 << 20
_QUEUED_CHUNKS = 8  # per digest thread: what may wait, so memory stays flat
_CUT = object()  # a digest thread's marker: report the digest so far and start anew
_STOP = object()


@dataclass(frozen=True)
class Member:
    path: str
    bytes: int
    sha256: str


class _DigestThread:
    """A SHA-256 computed on a thread of its own from the chunks it is given."""

    def __init__(self, name: str) -> None:
        self._chunks: queue.Queue[object] = queue.Queue(maxsize=_QUEUED_CHUNKS)
        self._digests: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        digest = hashlib.sha256()
        while True:
            item = self._chunks.get()
            if item is _STOP:
                return
            if item is _CUT:
                self._digests.put(digest.hexdigest())
                digest = hashlib.sha256()
            else:
                assert isinstance(item, bytes)
                digest.update(item)

    def update(self, data: bytes) -> None:
        self._chunks.put(data)

    def cut(self) -> str:
        """The digest of everything given since the last cut."""
        self._chunks.put(_CUT)
        return self._digests.get()

    def stop(self) -> None:
        self._chunks.put(_STOP)
        self._thread.join()


class _HashingSink:
    """The archive's output: counts and hashes every byte on its way to `target`. It has
    no seek, so zipfile streams (data descriptors) and the hash covers the final bytes."""

    def __init__(self, target: BinaryIO) -> None:
        self.target = target
        self.sha256 = _DigestThread("archive-sha256")
        self.position = 0

    def write(self, data: bytes) -> int:
        data = bytes(data)  # queued for the digest thread: never a view of a reused buffer
        self.target.write(data)
        self.sha256.update(data)
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        self.target.flush()

    def close(self) -> None:
        """The target is closed by whoever opened it."""


def _safe(path: str) -> str:
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise ValueError(f"{path!r} is not a relative path inside the archive")
    return path


class ArchiveWriter:
    """Writes members into `target` as a zip. Use it in a `with` block (its digest
    threads stop at the end, also on failure) and call close() for the archive's digest."""

    def __init__(self, target: BinaryIO) -> None:
        self._sink = _HashingSink(target)
        self._zip = zipfile.ZipFile(self._sink, "w")  # closed by close()
        self._member_sha256 = _DigestThread("member-sha256")
        self.members: list[Member] = []

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if error is not None:  # the archive is abandoned; close it now, not in zipfile's __del__
            with contextlib.suppress(Exception):
                self._zip.close()
        self._member_sha256.stop()
        self._sink.sha256.stop()

    def add_chunks(
        self,
        path: str,
        chunks: Iterable[bytes],
        *,
        size: int | None = None,
        deflate: bool,
        copy_to: Path | None = None,
    ) -> Member:
        """One member from `chunks`; `size`, when known, lets zipfile pick ZIP64 up front.
        With `copy_to` (a folder) the member is also written there as a file (the export
        command's unzipped copy)."""
        info = zipfile.ZipInfo(_safe(path))
        info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
        info.external_attr = 0o644 << 16
        if size is not None:
            info.file_size = size
        written = 0
        copy = None
        if copy_to is not None:
            target = copy_to / path
            target.parent.mkdir(parents=True, exist_ok=True)
            copy = target.open("wb")
        try:
            with self._zip.open(info, "w", force_zip64=size is None or size >= 1 << 31) as out:
                for chunk in chunks:
                    out.write(chunk)
                    self._member_sha256.update(bytes(chunk))
                    written += len(chunk)
                    if copy is not None:
                        copy.write(chunk)
        except BaseException:
            self._member_sha256.cut()  # drop the half member's digest
            raise
        finally:
            if copy is not None:
                copy.close()
        member = Member(path, written, self._member_sha256.cut())
        self.members.append(member)
        return member

    def add_file(self, path: str, source: Path, *, deflate: bool = True) -> Member:
        with source.open("rb") as handle:
            chunks = iter(lambda: handle.read(CHUNK_BYTES), b"")
            return self.add_chunks(path, chunks, size=source.stat().st_size, deflate=deflate)

    def add_bytes(self, path: str, data: bytes) -> Member:
        return self.add_chunks(path, [data], size=len(data), deflate=True)

    def sha256sums(self) -> bytes:
        """`sha256sum -c` input for every member so far ("<hex>  <path>" lines; a path
        with a line break or backslash escaped as sha256sum writes it)."""
        return "".join(checksum_line(m.sha256, m.path) for m in self.members).encode()

    def close(self) -> str:
        """Writes the central directory; returns the archive's SHA-256."""
        self._zip.close()
        self._sink.flush()
        return self._sink.sha256.cut()

    @property
    def size(self) -> int:
        return self._sink.position


class TextFile:
    """A UTF-8 text file written under `out` as `path` (its path in the archive too),
    counting and hashing its bytes as they are written."""

    def __init__(self, out: Path, path: str) -> None:
        self.path = path
        self.local = out / path
        self.local.parent.mkdir(parents=True, exist_ok=True)
        self.handle = self.local.open("w", encoding="utf-8", newline="")
        self._sha256 = hashlib.sha256()
        self.size = 0

    def write(self, text: str) -> int:
        data = text.encode("utf-8")
        self.handle.write(text)
        self._sha256.update(data)
        self.size += len(data)
        return len(text)

    def close(self) -> None:
        self.handle.close()

    @property
    def sha256(self) -> str:
        return self._sha256.hexdigest()

    def entry(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.size, "sha256": self.sha256}
