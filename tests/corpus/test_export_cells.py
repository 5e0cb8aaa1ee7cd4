"""Exports and spreadsheets (issue 32, Why 3): every CSV cell an export writes goes through
core.text.spreadsheet_cell, so a clip's file name (or any other text) that starts a formula
is written as text, and a file name with a line break can never add lines to SHA256SUMS."""

from __future__ import annotations

import csv
import io
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from core.models import Project
from corpus import formats
from corpus.archive import ArchiveWriter
from corpus.services import snapshot_build, snapshot_create
from tests.corpus.conftest import clip_with_audio, crowd_caption

FORMULA_NAME = '=HYPERLINK("http://evil.example","x").wav'


def _member(snapshot: Any, name: str) -> str:
    with snapshot.archive.open("rb") as stored, zipfile.ZipFile(stored) as archive:
        return archive.read(name).decode()


def test_a_file_name_that_starts_a_formula_is_written_as_text(project: Project, ann: Any) -> None:
    clip, _ = clip_with_audio(seconds=0.1, seed=1, name=FORMULA_NAME, project=project)
    crowd_caption(project, ann, "a door creaks open", split="train", clip=clip)
    snapshot = snapshot_create(project=project, fmt="clotho", text="raw", splits=["train"])
    snapshot = snapshot_build(snapshot=snapshot)

    rows = list(csv.reader(io.StringIO(_member(snapshot, formats.CLOTHO_FILES["train"]))))

    assert rows[1] == ["'" + FORMULA_NAME, "a door creaks open"]


def test_an_audio_export_escapes_file_names_in_every_csv(project: Project, ann: Any) -> None:
    clip, _ = clip_with_audio(seconds=0.1, seed=1, name="@SUM(1+1).wav", project=project)
    crowd_caption(project, ann, "a door creaks open", split="train", clip=clip)
    snapshot = snapshot_create(
        project=project, fmt="clotho", text="raw", splits=["train"], with_audio=True
    )
    snapshot = snapshot_build(snapshot=snapshot)

    for member in (formats.CLOTHO_FILES["train"], "clotho_metadata_development.csv"):
        first_cells = [row[0] for row in csv.reader(io.StringIO(_member(snapshot, member)))]
        assert first_cells[1] == "'@SUM(1+1).wav", member


def test_sha256sums_escape_a_path_with_a_line_break(tmp_path: Path) -> None:
    target = tmp_path / "out.zip"
    with target.open("wb") as handle, ArchiveWriter(handle) as archive:
        archive.add_bytes("audio/a.wav\nffff  evil.wav", b"RIFF")
        archive.add_bytes("audio/b.wav", b"data")
        sums = archive.sha256sums()
        archive.close()

    lines = sums.decode().splitlines()
    assert len(lines) == 2  # the name added no line
    assert lines[0].startswith("\\")
    assert lines[0].endswith("audio/a.wav\\nffff  evil.wav")


def test_sha256sum_checks_an_escaped_line(tmp_path: Path) -> None:
    name = "a\nb.wav"
    (tmp_path / name).write_bytes(b"RIFF")
    with (tmp_path / "x.zip").open("wb") as handle, ArchiveWriter(handle) as archive:
        archive.add_bytes(name, b"RIFF")
        (tmp_path / "SHA256SUMS").write_bytes(archive.sha256sums())
        archive.close()
    checked = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("name", ["a\nb.wav", "a\rb.wav", "a\x00b.wav", "a\u202eb.wav"])
def test_a_clotho_file_refuses_a_file_name_with_a_control_character(name: str) -> None:
    data = f'file_name,caption_1\n"{name}",a dog barks\n'.encode()
    with pytest.raises(formats.CorpusFileError, match=r"line 2: file_name .*U\+"):
        formats.read_clotho(data, name="c.csv")
