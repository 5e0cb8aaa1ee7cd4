"""Unpacking uploaded archives of audio files, refusing what could harm the server.

An archive from a browser is untrusted: its members may climb out of the folder
("../../etc/cron.d/x"), be links, or expand a few kilobytes into gigabytes. Members are
checked before anything is written, and only audio files are kept. What an archive may
unpack to is capped twice: in bytes, and as a multiple of its own size (audio barely
compresses, so a large multiple is a bomb, not a recording). Both caps are checked on the
sizes the archive declares before writing, and again on the bytes while they are written.

The number of members is capped too, and for a zip before Python's zipfile reads the
archive's directory of members: zipfile parses all of it up front, as many bytes as the end
record declares whatever member count it states (a crafted 94 MB directory of 2 million
entries took 8.6 s and 0.8 GB of memory). So the member count and the directory's size the
end records declare are checked first; the size cap bounds what zipfile reads to
CENTRAL_DIRECTORY_BYTES_PER_MEMBER per allowed member.
"""

from __future__ import annotations

import os
import struct
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO, TypeVar

AUDIO_SUFFIXES = frozenset(
    {".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".webm", ".mp4"}
)
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")
MAX_MEMBERS = 20_000
# What a zip's central directory may take per member allowed: an entry is a 46-byte header,
# the member's name, extra fields (under 40 bytes from common zip tools) and comment.
# 512 bytes leave room for names of a few hundred characters.
CENTRAL_DIRECTORY_BYTES_PER_MEMBER = 512
# defaults of the settings ARCHIVE_UNPACKED_MAX_BYTES and ARCHIVE_MAX_EXPANSION_RATIO
MAX_UNPACKED_BYTES = 2 * 1024**3
# deflate shrinks recorded audio by a few percent; only (near-)silence compresses much
MAX_EXPANSION_RATIO = 100.0


class ArchiveError(ValueError):
    """The archive cannot be unpacked; the message says why, for the person who sent it."""


@dataclass
class Unpacked:
    audio: list[Path] = field(default_factory=list)
    # members left out, each "name: reason", so the uploader learns what was not imported
    skipped: list[str] = field(default_factory=list)


def archive_kind(name: str, head: bytes) -> str:
    """ "zip" or "tar" from the file's first bytes, checked against its name.

    The name alone is not trusted: a renamed executable is refused.
    """
    lowered = name.lower()
    if not lowered.endswith(ARCHIVE_SUFFIXES):
        raise ArchiveError(
            f"{name}: not an archive Earmark reads; send .zip, .tar, .tar.gz, .tar.bz2 or .tar.xz"
        )
    if lowered.endswith(".zip"):
        if not head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
            raise ArchiveError(f"{name}: the name says zip but the content is not a zip archive")
        return "zip"
    compressed = {
        b"\x1f\x8b": (".tar.gz", ".tgz"),
        b"BZh": (".tar.bz2",),
        b"\xfd7zXZ\x00": (".tar.xz",),
    }
    for magic, suffixes in compressed.items():
        if head.startswith(magic):
            if not lowered.endswith(suffixes):
                raise ArchiveError(f"{name}: the content does not match the file name")
            return "tar"
    if lowered.endswith(".tar") and head[257:262] == b"ustar":
        return "tar"
    raise ArchiveError(f"{name}: the content is not a {Path(lowered).suffix[1:]} archive")


def _safe_member_path(name: str) -> PurePosixPath | None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    return path


def _wanted(path: PurePosixPath) -> str | None:
    """Why a member is left out, or None to keep it."""
    if any(part.startswith(".") or part == "__MACOSX" for part in path.parts):
        return "hidden or system file"
    if path.suffix.lower() not in AUDIO_SUFFIXES:
        return "not an audio file"
    return None


def unpack(
    archive: Path,
    *,
    name: str,
    into: Path,
    max_members: int = MAX_MEMBERS,
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
    max_expansion_ratio: float = MAX_EXPANSION_RATIO,
) -> Unpacked:
    """Unpacks the audio files of `archive` (uploaded as `name`) into the folder `into`.

    Raises ArchiveError before writing anything when the archive is unreadable, holds a
    member that escapes the folder, or would unpack to more members or bytes than allowed:
    `max_unpacked_bytes`, and `max_expansion_ratio` times the archive's own size. Members
    that are not audio (folders, text, links, hidden files) are skipped and listed; their
    sizes count too, since reading past them costs as much as unpacking them.
    """
    with archive.open("rb") as handle:
        kind = archive_kind(name, handle.read(512))
    packed = archive.stat().st_size
    limit = _Limit(
        max_bytes=min(max_unpacked_bytes, int(packed * max_expansion_ratio)),
        reason=(
            f"the archive unpacks to more than {max_unpacked_bytes / 1024**2:,.0f} MB; split it up"
            if max_unpacked_bytes <= packed * max_expansion_ratio
            else (
                f"the archive unpacks to more than {max_expansion_ratio:g} times its own size "
                "(audio barely compresses); send the files as they are"
            )
        ),
    )
    result = Unpacked()
    try:
        if kind == "zip":
            _check_zip_directory(archive, name=name, max_members=max_members)
            _unpack_zip(archive, into, result, max_members, limit)
        else:
            _unpack_tar(archive, into, result, max_members, limit)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(f"{name}: the archive is damaged ({exc})") from None
    if not result.audio:
        wanted = ", ".join(sorted(AUDIO_SUFFIXES))
        raise ArchiveError(f"{name}: no audio files inside (looked for {wanted})")
    return result


@dataclass
class _Limit:
    """How many bytes an archive may unpack to, and the refusal that says why."""

    max_bytes: int
    reason: str
    written: int = 0

    def check(self, total: int) -> None:
        if total > self.max_bytes:
            raise ArchiveError(self.reason)


Member = TypeVar("Member", zipfile.ZipInfo, tarfile.TarInfo)


def _plan(
    entries: Iterable[Member],
    name_of: Callable[[Member], str],
    size_of: Callable[[Member], int],
    is_file: Callable[[Member], bool],
    result: Unpacked,
    max_members: int,
    limit: _Limit,
) -> list[tuple[Member, PurePosixPath]]:
    """The members to write as (entry, relative path), after checking all of them.

    `entries` may be lazy (a compressed tar is read as it is listed): each member is
    checked as it comes, so listing stops at the first member over a limit.
    """
    keep: list[tuple[Member, PurePosixPath]] = []
    total = 0
    seen: set[str] = set()
    for count, entry in enumerate(entries, start=1):
        if count > max_members:
            raise ArchiveError(f"the archive holds more than {max_members:,} members")
        path = _safe_member_path(name_of(entry))
        if path is None:
            raise ArchiveError(f"member {name_of(entry)!r} points outside the archive's folder")
        if not is_file(entry):
            continue
        total += size_of(entry)
        limit.check(total)
        reason = _wanted(path)
        if reason:
            result.skipped.append(f"{path}: {reason}")
            continue
        if str(path).lower() in seen:
            result.skipped.append(f"{path}: a second file with this name")
            continue
        seen.add(str(path).lower())
        keep.append((entry, path))
    return keep


# The zip end of central directory record (without its comment), the zip64 end of
# central directory locator and the zip64 record (without extensible data): APPNOTE 4.3.14-16.
_END = struct.Struct("<4s4H2LH")
_END_SIGNATURE = b"PK\x05\x06"
_END_COMMENT_MAX = 0xFFFF
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_END = struct.Struct("<4sQ2H2L4Q")
_ZIP64_END_SIGNATURE = b"PK\x06\x06"


def _zip_directory_claims(handle: BinaryIO) -> tuple[int, int] | None:
    """(members, central directory bytes) as a zip's end records declare them, or None
    when there is no end record (zipfile then refuses the file without reading more).

    The records are found where zipfile looks for them, so the directory checked is the
    one zipfile would read: the end record in the last 64 KiB + 22 bytes (the last one,
    unless the file ends with one without a comment), and the zip64 record right before
    its locator, right before the end record.
    """
    size = handle.seek(0, os.SEEK_END)
    search_from = max(size - _END.size - _END_COMMENT_MAX, 0)
    start = max(search_from - _ZIP64_LOCATOR.size - _ZIP64_END.size, 0)
    handle.seek(start)
    tail = handle.read()
    last = len(tail) - _END.size
    if last >= 0 and tail[last : last + 4] == _END_SIGNATURE and tail[-2:] == b"\0\0":
        at = last
    else:
        at = tail.rfind(_END_SIGNATURE, search_from - start)
        if at < 0 or at > last:
            return None
    _, _, _, _, members, directory_bytes, _, _ = _END.unpack_from(tail, at)
    locator_at = at - _ZIP64_LOCATOR.size
    zip64_at = locator_at - _ZIP64_END.size
    if zip64_at < 0 or tail[locator_at : locator_at + 4] != _ZIP64_LOCATOR_SIGNATURE:
        return members, directory_bytes
    zip64 = _ZIP64_END.unpack_from(tail, zip64_at)
    if zip64[0] != _ZIP64_END_SIGNATURE:
        return members, directory_bytes
    # the zip64 record replaces the end record's fields (those are 0xFFFF... placeholders)
    return zip64[7], zip64[8]


def _check_zip_directory(archive: Path, *, name: str, max_members: int) -> None:
    """Refuses a zip whose end records declare more than `max_members` members, or a
    central directory larger than that many members take, before zipfile reads it."""
    with archive.open("rb") as handle:
        claims = _zip_directory_claims(handle)
    if claims is None:
        return
    members, directory_bytes = claims
    if members > max_members:
        raise ArchiveError(
            f"{name}: the archive holds more than {max_members:,} members "
            f"(its directory lists {members:,}); split it up"
        )
    max_directory_bytes = max_members * CENTRAL_DIRECTORY_BYTES_PER_MEMBER
    if directory_bytes > max_directory_bytes:
        raise ArchiveError(
            f"{name}: the archive's directory of members takes {directory_bytes:,} bytes, "
            f"more than the {max_directory_bytes:,} allowed for {max_members:,} members; "
            "split it up or shorten its file names"
        )


def _unpack_zip(
    archive: Path, into: Path, result: Unpacked, max_members: int, limit: _Limit
) -> None:
    with zipfile.ZipFile(archive) as zipped:
        keep = _plan(
            zipped.infolist(),
            lambda info: info.filename,
            lambda info: info.file_size,
            lambda info: not info.is_dir() and (info.external_attr >> 28) != 0o12,  # no links
            result,
            max_members,
            limit,
        )
        for info, path in keep:
            target = into / path
            target.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(info) as src, target.open("wb") as dst:
                _copy_at_most(src, dst, info.file_size, path, limit)
            result.audio.append(target)


def _unpack_tar(
    archive: Path, into: Path, result: Unpacked, max_members: int, limit: _Limit
) -> None:
    with tarfile.open(archive) as tarred:
        keep = _plan(
            tarred,  # lazily: members are read one by one, and listing stops at a limit
            lambda member: member.name,
            lambda member: member.size,
            lambda member: member.isreg(),  # links, devices and fifos are never written
            result,
            max_members,
            limit,
        )
        for member, path in keep:
            target = into / path
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tarred.extractfile(member)
            if src is None:
                continue
            with src, target.open("wb") as dst:
                _copy_at_most(src, dst, member.size, path, limit)
            result.audio.append(target)


def _copy_at_most(
    src: IO[bytes], dst: IO[bytes], declared: int, path: PurePosixPath, limit: _Limit
) -> None:
    """Copies a member, refusing one that holds more than its header declared, or bytes
    past the archive's limit, before writing them: the checks above trust the headers,
    so a lying header must not fill the disk."""
    written = 0
    while chunk := src.read(1024 * 1024):
        written += len(chunk)
        if written > declared:
            raise ArchiveError(f"member {path} is larger than its header says")
        limit.written += len(chunk)
        limit.check(limit.written)
        dst.write(chunk)
