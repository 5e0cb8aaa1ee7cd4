"""curation.archives: unpacking uploaded archives without trusting them."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Literal

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


def test_it_refuses_an_archive_with_too_many_members(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "a.zip", {f"{i}.wav": WAV for i in range(5)})

    with pytest.raises(ArchiveError, match="holds more than 4 members"):
        unpack(archive, name="a.zip", into=tmp_path / "out", max_members=4)


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
    listed: list[str] = []
    real_next = tarfile.TarFile.next

    def next_member(self: tarfile.TarFile) -> tarfile.TarInfo | None:
        member = real_next(self)
        if member is not None:
            listed.append(member.name)
        return member

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tarfile.TarFile, "next", next_member)
        with pytest.raises(ArchiveError, match="unpacks to more than"):
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
