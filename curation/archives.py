"""Unpacking uploaded archives of audio files, refusing what could harm the server.

An archive from a browser is untrusted: its members may climb out of the folder
("../../etc/cron.d/x"), be links, or expand a few kilobytes into gigabytes. Members are
checked before anything is written, and only audio files are kept. What an archive may
unpack to is capped twice: in bytes, and as a multiple of its own size (audio barely
compresses, so a large multiple is a bomb, not a recording). Both caps are checked on the
sizes the archive declares before writing, and again on the bytes while they are written.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TypeVar

AUDIO_SUFFIXES = frozenset(
    {".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".webm", ".mp4"}
)
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")
MAX_MEMBERS = 20_000
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
