"""Round trips of the real corpora in ../shared/data: AudioCaps v1 train/val/test and Clotho
development/validation, imported and exported back, byte for byte (same ids, same caption
text, same order, same quoting and line endings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.models import Project
from corpus.services import captions_import, snapshot_build, snapshot_create, snapshot_file_chunks

pytestmark = pytest.mark.shared_data


def exported(project: Project, fmt: str, splits: list[str], name: str) -> bytes:
    snapshot = snapshot_create(project=project, fmt=fmt, text="raw", splits=splits)
    snapshot = snapshot_build(snapshot=snapshot)
    return b"".join(snapshot_file_chunks(snapshot=snapshot, path=name))


def test_audiocaps_v1_comes_back_byte_for_byte(shared_data: Path, project: Project) -> None:
    files = {
        split: shared_data / "audiocaps" / f"{split}.csv" for split in ("train", "val", "test")
    }
    for split, path in files.items():
        captions_import(project=project, path=path, fmt="audiocaps", split=split)

    for split, path in files.items():
        assert exported(project, "audiocaps", [split], f"{split}.csv") == path.read_bytes(), split


def test_clotho_comes_back_byte_for_byte(shared_data: Path, project: Project) -> None:
    files = {
        "train": shared_data / "clotho" / "clotho_captions_development.csv",
        "val": shared_data / "clotho" / "clotho_captions_validation.csv",
    }
    for split, path in files.items():
        captions_import(project=project, path=path, fmt="clotho", split=split)

    for split, path in files.items():
        assert exported(project, "clotho", [split], path.name) == path.read_bytes(), split


def test_importing_audiocaps_train_twice_adds_nothing(shared_data: Path, project: Project) -> None:
    path = shared_data / "audiocaps" / "train.csv"
    first = captions_import(project=project, path=path, fmt="audiocaps", split="train")

    again = captions_import(project=project, path=path, fmt="audiocaps", split="train")

    assert (first.captions_created, first.clips_created) == (49_838, 49_838)
    assert (again.captions_created, again.clips_created, again.captions_existing) == (0, 0, 49_838)
