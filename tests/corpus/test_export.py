from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from annotation.models import Assignment
from core.models import Job, Project
from corpus.models import CorpusImport, CorpusStatistics, Snapshot
from corpus.services import (
    captions_import,
    snapshot_build,
    snapshot_create,
    snapshot_file_chunks,
)
from curation.models import Clip, Label
from tests.corpus.conftest import AUDIOCAPS, CLOTHO, crowd_caption

ALL = ["train", "val", "test"]


def build(project: Project, fmt: str, splits: list[str] | None = None, **kw: Any) -> Snapshot:
    snapshot = snapshot_create(project=project, fmt=fmt, text="raw", splits=splits or ALL)
    return snapshot_build(snapshot=snapshot, **kw)


def member(snapshot: Snapshot, name: str) -> bytes:
    return b"".join(snapshot_file_chunks(snapshot=snapshot, path=name))


def test_an_imported_audiocaps_file_exports_byte_for_byte(imported: CorpusImport) -> None:
    snapshot = build(imported.project, "audiocaps", ["train"])

    assert member(snapshot, "train.csv") == AUDIOCAPS.read_bytes()


def test_an_imported_clotho_file_exports_byte_for_byte(project: Project) -> None:
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="val")

    snapshot = build(project, "clotho", ["val"])

    assert member(snapshot, "clotho_captions_validation.csv") == CLOTHO.read_bytes()


def test_it_writes_one_file_per_split_and_a_manifest_with_checksums(
    imported: CorpusImport, tmp_path: Path
) -> None:
    snapshot = build(imported.project, "audiocaps", out_dir=tmp_path / "out")

    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["manifest.json", "test.csv", "train.csv", "val.csv"]
    for entry in snapshot.manifest["files"]:
        data = (tmp_path / "out" / entry["path"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["bytes"] == len(data)
    assert snapshot.counts == {
        "train": {"clips": 4, "captions": 5},
        "val": {"clips": 0, "captions": 0},
        "test": {"clips": 0, "captions": 0},
    }
    assert (
        tmp_path / "out" / "val.csv"
    ).read_bytes() == b"audiocap_id,youtube_id,start_time,caption\r\n"


def test_the_manifest_names_the_sources_and_versions(imported: CorpusImport) -> None:
    snapshot = build(imported.project, "jsonl", ["train"])

    manifest = json.loads(member(snapshot, "manifest.json"))
    assert manifest == snapshot.manifest
    assert (manifest["project"], manifest["version"], manifest["format"]) == ("sounds", 1, "jsonl")
    assert manifest["imports"][0]["sha256"] == hashlib.sha256(AUDIOCAPS.read_bytes()).hexdigest()
    assert manifest["recipes"][0]["subset"] == "audiocaps"
    assert manifest["recipes"][0]["spec"] == {"imported": "audiocaps"}
    assert manifest["pipeline_versions"] == []
    assert manifest["statistics"]["all"]["captions"] == 5


def test_the_archive_holds_the_files_and_its_checksum_is_recorded(imported: CorpusImport) -> None:
    snapshot = build(imported.project, "audiocaps", ["train"])

    data = snapshot.archive.read()
    assert snapshot.state == Snapshot.State.READY
    assert snapshot.archive_sha256 == hashlib.sha256(data).hexdigest()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert sorted(archive.namelist()) == ["manifest.json", "train.csv"]


def test_versions_count_up_per_project(imported: CorpusImport, olive: Any) -> None:
    first = build(imported.project, "audiocaps", ["train"])
    second = build(imported.project, "jsonl", ["train"])
    other = snapshot_create(
        project=Project.objects.get(slug="birds"), fmt="jsonl", text="raw", splits=["train"]
    )

    assert (first.version, second.version, other.version) == (1, 2, 1)


def test_approved_crowd_captions_are_exported_with_the_reviewers_fix(
    project: Project, ann: Any, abe: Any
) -> None:
    fixed = crowd_caption(project, ann, "a dgo barks")
    fixed.fixed_text = "a dog barks"
    fixed.save()
    crowd_caption(project, abe, "rejected words here", state=Assignment.State.REJECTED)
    crowd_caption(project, abe, "submitted words here", state=Assignment.State.SUBMITTED)
    crowd_caption(project, abe, "a train passes", split="test")

    snapshot = build(project, "jsonl", ["val", "test"])

    val = [json.loads(line) for line in member(snapshot, "val.jsonl").splitlines()]
    assert [(r["text"], r["provenance"], r["external_id"]) for r in val] == [
        ("a dog barks", "crowd", None)
    ]
    assert [json.loads(line)["text"] for line in member(snapshot, "test.jsonl").splitlines()] == [
        "a train passes"
    ]


def test_another_projects_captions_are_not_exported(imported: CorpusImport, olive: Any) -> None:
    birds = Project.objects.get(slug="birds")
    crowd_caption(birds, olive, "a bird sings", split="train")

    snapshot = build(imported.project, "jsonl", ["train"])

    texts = [json.loads(line)["text"] for line in member(snapshot, "train.jsonl").splitlines()]
    assert len(texts) == 5
    assert "a bird sings" not in texts


def test_jsonl_has_what_training_needs(imported: CorpusImport) -> None:
    dog = Label.objects.create(mid="/m/0bt9lr", name="Dog")
    bark = Label.objects.create(mid="/m/05tny_", name="Bark")
    clip = Clip.objects.get(youtube_id="AAAAAAAAAAA")
    clip.labels.set([dog, bark])
    clip.audio.name = "clips/audio/a.wav"
    clip.save()

    snapshot = build(imported.project, "jsonl", ["train"])

    first = json.loads(member(snapshot, "train.jsonl").splitlines()[0])
    assert first["clip_id"] == clip.pk
    assert first["audio"] == "clips/audio/a.wav"
    assert first["split"] == "train"
    assert first["external_id"] == "101"
    assert first["raw"] == first["text"] == "A dog barks twice"
    assert first["labels"] == ["/m/05tny_", "/m/0bt9lr"]
    assert (first["youtube_id"], first["start_seconds"], first["end_seconds"]) == (
        "AAAAAAAAAAA",
        30.0,
        40.0,
    )
    assert "processed" in first
    assert "train_text" in first


def test_clotho_export_groups_captions_by_clip(imported: CorpusImport) -> None:
    snapshot = build(imported.project, "clotho", ["train"])

    lines = member(snapshot, "clotho_captions_development.csv").decode().splitlines()
    assert lines[0] == "file_name,caption_1,caption_2"
    assert lines[1] == 'AAAAAAAAAAA_30.wav,A dog barks twice,"A dog barks, then a man speaks"'
    assert lines[3] == 'CCCCCCCCCCC_12.5.wav,"An engine idles and a horn says ""beep""",'


def test_audiocaps_export_refuses_local_clips(project: Project) -> None:
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    with pytest.raises(ValidationError, match="10 approved captions belong to local clips"):
        snapshot_create(project=project, fmt="audiocaps", text="raw", splits=ALL)

    assert not Snapshot.objects.exists()


@pytest.mark.parametrize(
    ("fmt", "text", "splits", "message"),
    [
        ("csv", "raw", ALL, "Unknown export format 'csv'"),
        ("jsonl", "clean", ALL, "Unknown text 'clean'"),
        ("jsonl", "raw", ["dev"], "dev is not one"),
        ("jsonl", "raw", [], "Choose splits among train, val, test."),
    ],
)
def test_it_refuses_a_bad_request(
    project: Project, fmt: str, text: str, splits: list[str], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        snapshot_create(project=project, fmt=fmt, text=text, splits=splits)


def test_a_ready_snapshot_is_not_rebuilt(imported: CorpusImport) -> None:
    snapshot = build(imported.project, "audiocaps", ["train"])

    with pytest.raises(ValidationError, match="is ready; it is not rebuilt"):
        snapshot_build(snapshot=snapshot)


def test_a_build_that_cannot_finish_marks_the_snapshot_failed(
    imported: CorpusImport, project: Project
) -> None:
    snapshot = snapshot_create(project=project, fmt="audiocaps", text="raw", splits=["train"])
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    with pytest.raises(ValidationError):
        snapshot_build(snapshot=snapshot)

    snapshot.refresh_from_db()
    assert snapshot.state == Snapshot.State.FAILED
    assert "belong to local clips" in snapshot.error
    assert not snapshot.archive


def test_the_build_stores_statistics_of_what_it_wrote(imported: CorpusImport) -> None:
    snapshot = build(imported.project, "audiocaps", ["train"])

    record = CorpusStatistics.objects.get(snapshot=snapshot)
    assert record.data["all"]["captions"] == 5
    assert record.data["all"]["tokens"] == 30


def test_a_missing_file_name_is_refused(imported: CorpusImport) -> None:
    snapshot = build(imported.project, "audiocaps", ["train"])

    with pytest.raises(ValidationError, match=r"has no file '\.\./settings\.py'"):
        snapshot_file_chunks(snapshot=snapshot, path="../settings.py")


def test_the_command_exports_into_a_folder(imported: CorpusImport, tmp_path: Path) -> None:
    out = tmp_path / "release"
    call_command(
        "export_dataset",
        "--format",
        "audiocaps",
        "--out",
        str(out),
        "--project",
        "sounds",
        "--split",
        "train",
        stdout=io.StringIO(),
    )

    assert (out / "train.csv").read_bytes() == AUDIOCAPS.read_bytes()
    assert Job.objects.get(kind="snapshot_build").state == Job.State.SUCCEEDED
    assert Snapshot.objects.get().state == Snapshot.State.READY


def test_the_command_refuses_a_folder_with_files(imported: CorpusImport, tmp_path: Path) -> None:
    (tmp_path / "old.csv").write_text("x")

    with pytest.raises(CommandError, match="is not empty"):
        call_command("export_dataset", "--format", "jsonl", "--out", str(tmp_path))


def test_the_command_explains_an_export_it_cannot_make(project: Project, tmp_path: Path) -> None:
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    with pytest.raises(CommandError, match="export them as clotho or jsonl"):
        call_command("export_dataset", "--format", "audiocaps", "--out", str(tmp_path / "o"))


def test_a_build_that_fails_while_storing_leaves_no_archive_behind(
    imported: CorpusImport, media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = snapshot_create(project=imported.project, fmt="jsonl", text="raw", splits=["train"])

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr(CorpusStatistics.objects, "create", broken)

    with pytest.raises(RuntimeError, match="database went away"):
        snapshot_build(snapshot=snapshot)

    snapshot.refresh_from_db()
    assert snapshot.state == Snapshot.State.FAILED
    assert snapshot.error == "database went away"
    assert (media / "snapshots").is_dir()  # the archive was stored, then removed
    assert not list((media / "snapshots").rglob("*.zip"))  # nor left under its temporary key
