"""Snapshots with audio (issue 22 item 1): the Clotho layout read with pandas, the Hugging
Face audiofolder layout (and the Clotho one through its card) loaded with the real
`datasets` library, the dataset card, SHA256SUMS, and clips without readable audio listed
in missing_audio.csv instead of failing the export."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import soundfile
import yaml
from django.core.files.base import ContentFile
from django.core.management import call_command

from core.models import Job, Project
from corpus.models import Snapshot
from corpus.services import snapshot_audio, snapshot_build, snapshot_create, snapshot_file_chunks
from corpus.services.snapshots import PARTIAL_DIR
from curation.models import Clip, Label
from tests.corpus.conftest import SAMPLE_RATE, clip_with_audio, crowd_caption

ALL = ["train", "val", "test"]


@dataclass
class Corpus:
    """Four clips with audio: two in train (one with two captions), one local in val, one
    in test; `samples` holds each clip's audio by clip id."""

    project: Project
    clips: dict[str, Clip]
    samples: dict[int, np.ndarray]


@pytest.fixture
def corpus(project: Project, ann: Any, abe: Any) -> Corpus:
    dog = Label.objects.create(mid="/m/0bt9lr", name="Dog")
    bark = Label.objects.create(mid="/m/05tny_", name="Bark")
    barking, a = clip_with_audio(seconds=0.5, seed=1, youtube_id="AAAAAAAAAAA", start=30)
    barking.labels.set([dog, bark])
    engine, b = clip_with_audio(seconds=0.25, seed=2, youtube_id="BBBBBBBBBBB", start=12.5)
    rain, c = clip_with_audio(seconds=0.75, seed=3, name="rain.mp3", project=project)
    train, d = clip_with_audio(seconds=1.0, seed=4, youtube_id="DDDDDDDDDDD", start=0)
    crowd_caption(project, ann, "a dog barks twice", split="train", clip=barking)
    crowd_caption(project, abe, "a dog barks and barks", split="train", clip=barking)
    crowd_caption(project, ann, "an engine idles", split="train", clip=engine)
    crowd_caption(project, ann, "rain falls on a roof", split="val", clip=rain)
    crowd_caption(project, ann, "a train passes by", split="test", clip=train)
    clips = {"barking": barking, "engine": engine, "rain": rain, "train": train}
    samples = {barking.pk: a, engine.pk: b, rain.pk: c, train.pk: d}
    return Corpus(project, clips, samples)


def build_audio(project: Project, fmt: str, **kw: Any) -> Snapshot:
    snapshot = snapshot_create(
        project=project, fmt=fmt, text="raw", splits=ALL, with_audio=True, **kw
    )
    return snapshot_build(snapshot=snapshot)


def extract(snapshot: Snapshot, folder: Path) -> Path:
    with snapshot.archive.open("rb") as stored, zipfile.ZipFile(stored) as archive:
        archive.extractall(folder)
    return folder


def load(path: Path, tmp_path: Path, **kw: Any) -> Any:
    import datasets

    return datasets.load_dataset(str(path), cache_dir=str(tmp_path / "hf-cache"), **kw)


def by_clip(rows: Any) -> dict[int, dict[str, Any]]:
    return {row["clip_id"]: row for row in rows}


# The Hugging Face layout ----------------------------------------------------------------


def test_an_audio_snapshot_loads_with_datasets_audiofolder(corpus: Corpus, tmp_path: Path) -> None:
    snapshot = build_audio(corpus.project, "jsonl")
    root = extract(snapshot, tmp_path / "release")

    dataset = load(Path("audiofolder"), tmp_path, data_dir=str(root))

    assert sorted(dataset) == ["test", "train", "validation"]
    assert [dataset[s].num_rows for s in ("train", "validation", "test")] == [2, 1, 1]
    train = by_clip(dataset["train"])
    barking = train[corpus.clips["barking"].pk]
    assert barking["captions"] == ["a dog barks twice", "a dog barks and barks"]
    assert barking["labels"] == "/m/05tny_;/m/0bt9lr"
    assert barking["label_names"] == "Bark;Dog"
    assert (barking["source_id"], barking["start_seconds"]) == ("AAAAAAAAAAA", 30.0)
    assert barking["licence"] == "cc-by-4.0"
    for split in ("train", "validation", "test"):
        for row in dataset[split]:
            decoded = row["audio"].get_all_samples()
            expected = corpus.samples[row["clip_id"]]
            assert decoded.sample_rate == SAMPLE_RATE
            assert decoded.data.shape == (1, len(expected))
            assert np.allclose(decoded.data[0].numpy() * 32768, expected, atol=1)


def test_its_caption_file_names_each_clips_audio_in_the_archive(
    corpus: Corpus, tmp_path: Path
) -> None:
    snapshot = build_audio(corpus.project, "jsonl")
    root = extract(snapshot, tmp_path / "release")

    records = [json.loads(line) for line in (root / "train.jsonl").read_text().splitlines()]

    assert [r["audio_file"] for r in records] == [
        "train/AAAAAAAAAAA_30.wav",
        "train/AAAAAAAAAAA_30.wav",
        "train/BBBBBBBBBBB_12.5.wav",
    ]
    assert all((root / r["audio_file"]).is_file() for r in records)
    assert records[0]["audio"] == corpus.clips["barking"].audio.name  # still the stored file


# The Clotho layout -----------------------------------------------------------------------


def test_a_clotho_audio_snapshot_reads_with_pandas(corpus: Corpus, tmp_path: Path) -> None:
    snapshot = build_audio(corpus.project, "clotho")
    root = extract(snapshot, tmp_path / "release")

    development = pd.read_csv(root / "clotho_captions_development.csv")
    assert list(development.columns) == ["file_name", "caption_1", "caption_2"]
    assert development["file_name"].tolist() == ["AAAAAAAAAAA_30.wav", "BBBBBBBBBBB_12.5.wav"]
    assert development["caption_2"].fillna("").tolist() == ["a dog barks and barks", ""]
    validation = pd.read_csv(root / "clotho_captions_validation.csv")
    assert validation["file_name"].tolist() == ["rain.wav"]  # named after the WAV it is
    for folder, captions in [
        ("development", development),
        ("validation", validation),
        ("evaluation", pd.read_csv(root / "clotho_captions_evaluation.csv")),
    ]:
        metadata = pd.read_csv(root / f"clotho_metadata_{folder}.csv")
        assert metadata["file_name"].tolist() == captions["file_name"].tolist()
        for name, clip_id in zip(metadata["file_name"], metadata["clip_id"], strict=True):
            audio, rate = soundfile.read(root / folder / name, dtype="int16")
            assert rate == SAMPLE_RATE
            assert np.array_equal(audio, corpus.samples[int(clip_id)])
    metadata = pd.read_csv(root / "clotho_metadata_development.csv", keep_default_na=False)
    assert metadata.iloc[0][["source_id", "labels", "licence"]].tolist() == [
        "AAAAAAAAAAA",
        "/m/05tny_;/m/0bt9lr",
        "cc-by-4.0",
    ]


def test_a_clotho_audio_snapshot_loads_with_datasets_through_its_card(
    corpus: Corpus, tmp_path: Path
) -> None:
    snapshot = build_audio(corpus.project, "clotho")
    root = extract(snapshot, tmp_path / "release")

    dataset = load(root, tmp_path)  # the card maps development/ to train, and so on

    assert {s: dataset[s].num_rows for s in dataset} == {"train": 2, "validation": 1, "test": 1}
    rain = dataset["validation"][0]
    assert rain["captions"] == ["rain falls on a roof"]
    assert rain["audio"].get_all_samples().data.shape == (1, 24_000)


def test_two_clips_of_one_name_keep_apart(project: Project, ann: Any, tmp_path: Path) -> None:
    first, _ = clip_with_audio(seconds=0.1, seed=1, name="take.wav", project=project)
    second, _ = clip_with_audio(seconds=0.2, seed=2, name="other/take.wav", project=project)
    crowd_caption(project, ann, "a door creaks open", split="train", clip=first)
    crowd_caption(project, ann, "a door slams shut", split="train", clip=second)

    root = extract(build_audio(project, "clotho"), tmp_path / "release")

    names = pd.read_csv(root / "clotho_captions_development.csv")["file_name"].tolist()
    assert names == ["take.wav", f"take-clip{second.pk}.wav"]
    assert soundfile.info(root / "development" / names[1]).frames == 6400


# The card, the checksums, the manifest -------------------------------------------------------


def card_header(text: str) -> dict[str, Any]:
    assert text.startswith("---\n")
    head, _, _ = text[4:].partition("\n---\n")
    parsed = yaml.safe_load(head)
    assert isinstance(parsed, dict)
    return parsed


def test_the_card_has_the_hugging_face_header_and_how_it_was_collected(
    corpus: Corpus, tmp_path: Path
) -> None:
    snapshot = build_audio(corpus.project, "clotho", licence="cc-by-sa-4.0")
    card = b"".join(snapshot_file_chunks(snapshot=snapshot, path="README.md")).decode()

    header = card_header(card)
    assert header["license"] == "cc-by-sa-4.0"
    assert header["pretty_name"] == "Everyday sounds v1"
    assert header["task_categories"] == ["audio-text-to-text", "text-to-audio"]
    assert header["size_categories"] == ["n<1K"]
    assert header["configs"] == [
        {
            "config_name": "default",
            "data_files": [
                {"split": "train", "path": "development/**"},
                {"split": "validation", "path": "validation/**"},
                {"split": "test", "path": "evaluation/**"},
            ],
        }
    ]
    body = card.partition("\n---\n")[2]
    assert "## How it was collected" in body
    assert "subset `crowd`" in body  # the recipe (subset) the clips come from
    assert "| batch | train | 1 | 3 to 40 | $0.10 per HIT | none |" in body
    assert "Captions are the text as written, with reviewers' fixes applied." in body
    assert "| all | 4 | 5 | 1.25 |" in body  # statistics: clips, captions, per clip


def test_a_split_without_clips_has_no_folder_and_no_config(corpus: Corpus, tmp_path: Path) -> None:
    Clip.objects.filter(pk=corpus.clips["train"].pk).update(audio="", status="pending")

    snapshot = build_audio(corpus.project, "jsonl")
    root = extract(snapshot, tmp_path / "release")

    paths = [
        c["path"] for c in card_header((root / "README.md").read_text())["configs"][0]["data_files"]
    ]
    assert paths == ["train/**", "validation/**"]
    assert not (root / "test").exists()
    assert sorted(load(Path("audiofolder"), tmp_path, data_dir=str(root))) == [
        "train",
        "validation",
    ]


def test_sha256sums_cover_every_file_and_the_manifest_lists_the_text_files(
    corpus: Corpus, tmp_path: Path
) -> None:
    snapshot = build_audio(corpus.project, "jsonl")
    root = extract(snapshot, tmp_path / "release")

    sums: dict[str, str] = {}
    for line in (root / "SHA256SUMS").read_text().splitlines():
        digest, path = line.split("  ", 1)
        sums[path] = digest
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {
        "SHA256SUMS"
    }
    assert set(sums) == on_disk
    assert "train/AAAAAAAAAAA_30.wav" in sums
    assert "manifest.json" in sums
    for path, digest in sums.items():
        assert hashlib.sha256((root / path).read_bytes()).hexdigest() == digest, path
    listed = {e["path"]: e["sha256"] for e in snapshot.files + snapshot.manifest["extra_files"]}
    assert set(listed) == {
        "train.jsonl",
        "val.jsonl",
        "test.jsonl",
        "train/metadata.jsonl",
        "validation/metadata.jsonl",
        "test/metadata.jsonl",
        "missing_audio.csv",
        "README.md",
    }
    assert all(sums[path] == digest for path, digest in listed.items())
    assert snapshot.manifest["audio"] == {
        "layout": "audiofolder",
        "folders": {"train": "train", "validation": "validation", "test": "test"},
        "files": 4,
        "bytes": sum((root / p).stat().st_size for p in sums if p.endswith(".wav")),
        "missing": 0,
    }


def test_wav_files_are_stored_and_text_deflated(corpus: Corpus) -> None:
    snapshot = build_audio(corpus.project, "jsonl")

    with snapshot.archive.open("rb") as stored, zipfile.ZipFile(stored) as archive:
        kinds = {i.filename: i.compress_type for i in archive.infolist()}
        assert archive.testzip() is None
    assert kinds["train/AAAAAAAAAAA_30.wav"] == zipfile.ZIP_STORED
    assert kinds["train/metadata.jsonl"] == zipfile.ZIP_DEFLATED
    data = snapshot.archive.open("rb").read()
    assert snapshot.archive_sha256 == hashlib.sha256(data).hexdigest()
    assert snapshot.archive.name == "snapshots/sounds-v1-jsonl-raw-audio.zip"


def test_the_archive_is_written_under_a_temporary_key_and_moved(
    corpus: Corpus, media: Path
) -> None:
    build_audio(corpus.project, "jsonl")

    assert sorted(p.name for p in (media / "snapshots").glob("*.zip")) == [
        "sounds-v1-jsonl-raw-audio.zip"
    ]
    assert list((media / PARTIAL_DIR).iterdir()) == []


def test_a_build_that_fails_midway_leaves_no_archive_behind(
    corpus: Corpus, media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable(*args: Any, **kwargs: Any) -> str:
        raise OSError("I/O error reading the disk")

    monkeypatch.setattr(snapshot_audio, "_copy_audio", unreadable)
    snapshot = snapshot_create(
        project=corpus.project, fmt="jsonl", text="raw", splits=ALL, with_audio=True
    )

    with pytest.raises(OSError, match="I/O error"):
        snapshot_build(snapshot=snapshot)

    snapshot.refresh_from_db()
    assert (snapshot.state, snapshot.error) == ("failed", "I/O error reading the disk")
    assert not list((media / "snapshots").rglob("*.zip"))


# Clips without readable audio --------------------------------------------------------------


def test_clips_without_readable_audio_are_listed_not_fatal(
    corpus: Corpus, media: Path, tmp_path: Path
) -> None:
    engine, rain, train = (corpus.clips[k] for k in ("engine", "rain", "train"))
    (media / engine.audio.name).unlink()  # deleted from storage
    rain.audio.save("broken.wav", ContentFile(b"<html>not audio</html>"))  # not a WAV
    Clip.objects.filter(pk=train.pk).update(audio="", status=Clip.Status.FAILED)  # never fetched

    snapshot = build_audio(corpus.project, "clotho")

    assert snapshot.state == Snapshot.State.READY
    assert snapshot.missing_audio == 3
    assert snapshot.counts == {
        "train": {"clips": 1, "captions": 2, "missing_audio": 1},
        "val": {"clips": 0, "captions": 0, "missing_audio": 1},
        "test": {"clips": 0, "captions": 0, "missing_audio": 1},
    }
    missing = b"".join(snapshot_file_chunks(snapshot=snapshot, path="missing_audio.csv"))
    rows = list(csv.DictReader(io.StringIO(missing.decode())))
    assert [(r["split"], int(r["clip_id"]), r["captions"], r["reason"]) for r in rows] == [
        ("train", engine.pk, "1", "the audio file is missing from storage"),
        ("val", rain.pk, "1", "the audio file is not a WAV file"),
        ("test", train.pk, "1", "no audio stored (the clip is failed)"),
    ]
    development = b"".join(
        snapshot_file_chunks(snapshot=snapshot, path="clotho_captions_development.csv")
    ).decode()
    assert "an engine idles" not in development
    assert snapshot.manifest["statistics"]["all"]["captions"] == 2


def test_the_command_writes_the_audio_into_its_folder(corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "release"
    stdout = io.StringIO()

    call_command(
        "export_dataset", "--format", "jsonl", "--out", str(out), "--with-audio", stdout=stdout
    )

    assert "4 audio files (audiofolder layout)" in stdout.getvalue()
    assert Job.objects.get().label == "Export sounds v1 (jsonl, raw, with audio)"
    sums = (out / "SHA256SUMS").read_text().splitlines()
    for line in sums:
        digest, path = line.split("  ", 1)
        assert hashlib.sha256((out / path).read_bytes()).hexdigest() == digest
    assert len(sums) == 4 + 3 + 3 + 3  # audio, caption files, metadata, card+missing+manifest
