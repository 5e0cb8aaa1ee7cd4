"""curation.archives: unpacking uploaded archives without trusting them."""

from __future__ import annotations

import contextlib
import io
import struct
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import pytest

from curation.archives import ArchiveError, archive_kind, unpack

WAV = b"RIFF" + b"\0" * 100  # content is not decoded here, only unpacked


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zipped:
        for name, data in members.items():
            zipped.writestr(name, data)
    return path


TarMode = Literal["w:gz", "w:bz2", "w:xz"]


def _tar(path: Path, members: dict[str, bytes], mode: TarMode = "w:gz") -> Path:
    with tarfile.open(path, mode) as tarred:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tarred.addfile(info, io.BytesIO(data))
    return path


def test_it_unpacks_the_audio_of_a_zip_keeping_folders(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "a.zip", {"rain/a.wav": WAV, "b.flac": WAV})

    result = unpack(archive, name="field.zip", into=tmp_path / "out")

    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in result.audio) == [
        "b.flac",
        "rain/a.wav",
    ]
    assert (tmp_path / "out" / "rain" / "a.wav").read_bytes() == WAV


def test_it_unpacks_compressed_tars(tmp_path: Path) -> None:
    compressions: list[tuple[TarMode, str]] = [
        ("w:gz", ".tar.gz"),
        ("w:bz2", ".tar.bz2"),
        ("w:xz", ".tar.xz"),
    ]
    for mode, suffix in compressions:
        archive = _tar(tmp_path / f"a{suffix}", {"a.wav": WAV}, mode)
        result = unpack(archive, name=f"a{suffix}", into=tmp_path / suffix)
        assert [p.name for p in result.audio] == ["a.wav"]


def test_it_lists_what_it_leaves_out(tmp_path: Path) -> None:
    archive = _zip(
        tmp_path / "a.zip",
        {"a.wav": WAV, "README.txt": b"hi", "__MACOSX/._a.wav": WAV, ".hidden.wav": WAV},
    )

    result = unpack(archive, name="a.zip", into=tmp_path / "out")

    assert [p.name for p in result.audio] == ["a.wav"]
    assert result.skipped == [
        "README.txt: not an audio file",
        "__MACOSX/._a.wav: hidden or system file",
        ".hidden.wav: hidden or system file",
    ]


@pytest.mark.parametrize("evil", ["../escape.wav", "/etc/evil.wav", "a/../../escape.wav"])
def test_it_refuses_a_member_that_climbs_out_and_writes_nothing(tmp_path: Path, evil: str) -> None:
    archive = _zip(tmp_path / "a.zip", {"fine.wav": WAV, evil: WAV})

    with pytest.raises(ArchiveError, match="points outside"):
        unpack(archive, name="a.zip", into=tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "escape.wav").exists()


def test_it_never_writes_links_from_a_tar(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tarred:
        link = tarfile.TarInfo("passwd.wav")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tarred.addfile(link)
        info = tarfile.TarInfo("ok.wav")
        info.size = len(WAV)
        tarred.addfile(info, io.BytesIO(WAV))

    result = unpack(archive, name="a.tar", into=tmp_path / "out")

    assert [p.name for p in result.audio] == ["ok.wav"]
    assert not (tmp_path / "out" / "passwd.wav").exists()


def test_it_refuses_an_archive_that_unpacks_too_big(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "a.zip", {"a.wav": b"\0" * 5000, "b.wav": b"\0" * 5000})

    with pytest.raises(ArchiveError, match="unpacks to more than"):
        unpack(archive, name="a.zip", into=tmp_path / "out", max_unpacked_bytes=8000)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["a.zip", "a.tar.gz"])
def test_it_refuses_an_archive_with_too_many_members(tmp_path: Path, name: str) -> None:
    members = {f"{i}.wav": WAV for i in range(5)}
    archive = (_zip if name.endswith(".zip") else _tar)(tmp_path / name, members)

    with pytest.raises(ArchiveError, match="holds more than 4 members"):
        unpack(archive, name=name, into=tmp_path / "out", max_members=4)


@contextlib.contextmanager
def _tar_members_listed() -> Iterator[list[str]]:
    """The names of the tar members read while the block runs, in reading order."""
    listed: list[str] = []
    real_next = tarfile.TarFile.next

    def next_member(self: tarfile.TarFile) -> tarfile.TarInfo | None:
        member = real_next(self)
        if member is not None:
            listed.append(member.name)
        return member

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tarfile.TarFile, "next", next_member)
        yield listed


def test_a_tar_is_listed_no_further_than_one_member_past_the_cap(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "a.tar.gz", {f"{i}.wav": WAV for i in range(50)})
    with (
        _tar_members_listed() as listed,
        pytest.raises(ArchiveError, match="holds more than 4 members"),
    ):
        unpack(archive, name="a.tar.gz", into=tmp_path / "out", max_members=4)
    assert sorted(set(listed)) == [f"{i}.wav" for i in range(5)]


# A zip's end records (APPNOTE 4.3.14-16), to declare what the archive does not hold.
END = struct.Struct("<4s4H2LH")
ZIP64_END = struct.Struct("<4sQ2H2L4Q")
ZIP64_LOCATOR = struct.Struct("<4sLQL")


def _declaring(path: Path, members: int, *, comment: bytes = b"", zip64: bool = False) -> Path:
    """A one-member zip whose end record (or zip64 end record) declares `members` members:
    the directory itself still lists one, which is all zipfile would read."""
    with zipfile.ZipFile(path, "w") as zipped:
        zipped.writestr("a.wav", WAV)
        zipped.comment = comment
    data = path.read_bytes()
    at = len(data) - len(comment) - END.size
    _, _, _, _, _, directory_bytes, directory_at, _ = END.unpack_from(data, at)
    if zip64:
        record = ZIP64_END.pack(
            b"PK\x06\x06", ZIP64_END.size - 12, 45, 45, 0, 0,
            members, members, directory_bytes, directory_at,
        )  # fmt: skip
        locator = ZIP64_LOCATOR.pack(b"PK\x06\x07", 0, at, 1)
        end = END.pack(b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, len(comment))
        path.write_bytes(data[:at] + record + locator + end + comment)
    else:
        end = END.pack(
            b"PK\x05\x06", 0, 0, members, members, directory_bytes, directory_at, len(comment)
        )
        path.write_bytes(data[:at] + end + comment)
    return path


def _forbid_zipfile(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("zipfile.ZipFile read the directory of a refused archive")

    monkeypatch.setattr(zipfile, "ZipFile", refuse)


@pytest.mark.parametrize(
    ("declared", "comment", "zip64"),
    [(65_535, b"", False), (65_535, b"made by a zip tool", False), (5_000_000, b"", True)],
    ids=["end-record", "behind-a-comment", "zip64"],
)
def test_a_zip_declaring_too_many_members_is_refused_before_zipfile_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: int, comment: bytes, zip64: bool
) -> None:
    archive = _declaring(tmp_path / "many.zip", declared, comment=comment, zip64=zip64)
    _forbid_zipfile(monkeypatch)

    with pytest.raises(
        ArchiveError,
        match=rf"^many\.zip: the archive holds more than 20,000 members \(its directory "
        rf"lists {declared:,}\)",
    ):
        unpack(archive, name="many.zip", into=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_zip_whose_directory_is_too_large_for_its_cap_is_refused_before_zipfile_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # three members whose 805-byte names make a 2,553-byte directory; 4 members may take 2,048
    deep = "/".join(["x" * 199] * 4)
    archive = _zip(tmp_path / "long.zip", {f"{deep}/{i}.wav": WAV for i in range(3)})
    _forbid_zipfile(monkeypatch)

    with pytest.raises(
        ArchiveError,
        match=r"^long\.zip: the archive's directory of members takes 2,553 bytes, more than "
        r"the 2,048 allowed for 4 members",
    ):
        unpack(archive, name="long.zip", into=tmp_path / "out", max_members=4)


@pytest.mark.parametrize(
    ("comment", "zip64"),
    [(b"made by a zip tool", False), (b"", True)],
    ids=["comment", "zip64"],
)
def test_zips_within_the_caps_are_unpacked_whatever_their_end_records(
    tmp_path: Path, comment: bytes, zip64: bool
) -> None:
    archive = _declaring(tmp_path / "one.zip", 1, comment=comment, zip64=zip64)

    result = unpack(archive, name="one.zip", into=tmp_path / "out", max_members=1)

    assert [p.name for p in result.audio] == ["a.wav"]


def test_it_refuses_a_damaged_archive_with_the_reason(tmp_path: Path) -> None:
    whole = _zip(tmp_path / "a.zip", {"a.wav": WAV * 50}).read_bytes()
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(whole[: len(whole) // 2])

    with pytest.raises(ArchiveError, match=r"damaged\.zip: the archive is damaged"):
        unpack(damaged, name="damaged.zip", into=tmp_path / "out")


def test_it_refuses_an_archive_without_audio(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "a.zip", {"notes.txt": b"x"})

    with pytest.raises(ArchiveError, match="no audio files inside"):
        unpack(archive, name="notes.zip", into=tmp_path / "out")


@pytest.mark.parametrize(
    ("name", "head", "message"),
    [
        ("clips.exe", b"MZ", "not an archive Earmark reads"),
        ("clips.zip", b"MZ\x90\x00", "the name says zip but the content is not"),
        ("clips.tar.gz", b"BZh91AY", "does not match the file name"),
        ("clips.tar", b"\0" * 512, "the content is not a tar archive"),
    ],
)
def test_it_checks_the_content_against_the_name(name: str, head: bytes, message: str) -> None:
    with pytest.raises(ArchiveError, match=message):
        archive_kind(name, head)


def _zip_bomb(path: Path, *, member: str = "bomb.wav", mebibytes: int = 64) -> Path:
    """A zip of `mebibytes` MiB of zeros, deflated to about a thousandth of that."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("fine.wav", WAV)
        with zipped.open(member, "w") as out:
            for _ in range(mebibytes):
                out.write(bytes(1024 * 1024))
    return path


def test_it_refuses_a_zip_bomb_past_the_byte_cap_writing_nothing(tmp_path: Path) -> None:
    bomb = _zip_bomb(tmp_path / "a.zip")
    assert bomb.stat().st_size < 1024 * 1024

    with pytest.raises(ArchiveError, match="unpacks to more than 16 MB"):
        unpack(
            bomb,
            name="a.zip",
            into=tmp_path / "out",
            max_unpacked_bytes=16 * 1024**2,
            max_expansion_ratio=1e6,
        )
    assert not (tmp_path / "out").exists()


def test_it_refuses_an_archive_that_expands_far_beyond_its_own_size(tmp_path: Path) -> None:
    bomb = _zip_bomb(tmp_path / "a.zip")  # well under the default 2 GiB

    with pytest.raises(ArchiveError, match="more than 100 times its own size"):
        unpack(bomb, name="a.zip", into=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_members_it_skips_count_towards_the_cap(tmp_path: Path) -> None:
    bomb = _zip_bomb(tmp_path / "a.zip", member="notes.txt", mebibytes=2)

    with pytest.raises(ArchiveError, match="unpacks to more than 1 MB"):
        unpack(
            bomb,
            name="a.zip",
            into=tmp_path / "out",
            max_unpacked_bytes=1024**2,
            max_expansion_ratio=1e6,
        )


def test_a_compressed_tar_is_refused_at_the_first_member_over_the_cap(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "a.tar.gz", {f"{i}.wav": bytes(4096) for i in range(50)})
    with _tar_members_listed() as listed, pytest.raises(ArchiveError, match="unpacks to more than"):
        unpack(
            archive,
            name="a.tar.gz",
            into=tmp_path / "out",
            max_unpacked_bytes=10_000,
            max_expansion_ratio=1e6,
        )
    # 3 x 4,096 bytes > 10,000: the rest of the stream is never decompressed
    assert sorted(set(listed)) == ["0.wav", "1.wav", "2.wav"]


def test_the_cap_holds_while_writing_too(tmp_path: Path) -> None:
    from curation import archives

    limit = archives._Limit(max_bytes=3 * 1024 * 1024, reason="over the cap", written=0)
    out = io.BytesIO()

    with pytest.raises(ArchiveError, match="over the cap"):
        archives._copy_at_most(
            io.BytesIO(bytes(4 * 1024 * 1024)), out, 4 * 1024 * 1024, PurePosixPath("a.wav"), limit
        )
    assert out.tell() == 3 * 1024 * 1024  # the chunk that would cross it is never written
