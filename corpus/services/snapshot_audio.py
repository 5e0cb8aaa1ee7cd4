"""The audio of an audio snapshot, streamed into its archive clip by clip.

Two layouts, chosen by the snapshot's format:

- Clotho (format clotho): `development/`, `validation/`, `evaluation/` folders of WAV files
  named as in the caption CSVs beside them, and `clotho_metadata_<folder>.csv` per folder;
- Hugging Face audiofolder (formats audiocaps and jsonl): `train/`, `validation/`, `test/`
  folders, the names `datasets.load_dataset("audiofolder", data_dir=…)` reads as splits.

Either way each folder has a `metadata.jsonl` (one row per audio file: its captions, clip,
source, times, labels and licence), so `datasets` loads both (the Clotho one through the
card's split mapping). A clip whose audio is missing or unreadable is left out of every
file with its captions and listed in `missing_audio.csv`, instead of failing the export.
Only one chunk of one clip is in memory at a time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from django.core.files.storage import Storage

from corpus import formats, stats
from corpus.archive import CHUNK_BYTES, ArchiveWriter, TextFile
from corpus.datacard import SplitFacts
from corpus.models import Snapshot
from corpus.services.rows import CaptionRow, clip_grouped_rows, clotho_width, export_reads
from curation.models import Clip, Label

MISSING_AUDIO_FILE = "missing_audio.csv"
MISSING_AUDIO_HEADER = [
    "split",
    "clip_id",
    "source",
    "source_id",
    "file_name",
    "captions",
    "reason",
]
CLOTHO_METADATA_HEADER = [
    "file_name",
    "clip_id",
    "source",
    "source_id",
    "start_seconds",
    "end_seconds",
    "labels",
    "label_names",
    "licence",
]
_JSON_LINE = json.JSONEncoder(ensure_ascii=False)


def layout_of(snapshot: Snapshot) -> str:
    return "clotho" if snapshot.format == Snapshot.Format.CLOTHO else "audiofolder"


def audio_folder(layout: str, split: str) -> str:
    folders = formats.CLOTHO_AUDIO_FOLDERS if layout == "clotho" else formats.HF_SPLITS
    return folders[split]


@dataclass
class SplitAudio:
    """What one split's pass wrote."""

    facts: SplitFacts
    captions_file: dict[str, Any] | None  # the Clotho caption CSV's manifest entry
    text_files: list[TextFile] = field(default_factory=list)  # metadata files, for the archive
    paths: dict[int, str] = field(default_factory=dict)  # clip id -> its audio in the archive


def audio_file_name(row: CaptionRow) -> str:
    """The clip's name in its folder: the Clotho file name ("<YouTube id>_<start>.wav", or a
    local clip's own name) with the extension of what is stored, WAV."""
    name = PurePosixPath(row.file_name.replace("\\", "/")).name
    stem = PurePosixPath(name).stem.strip()
    if not stem or stem.startswith("."):
        stem = f"clip{row.clip_id}"
    return f"{stem}.wav"


def _unique(name: str, clip_id: int, taken: set[str]) -> str:
    """Two clips of a folder with one name (two local files called the same) keep apart."""
    if name in taken:
        name = f"{PurePosixPath(name).stem}-clip{clip_id}.wav"
    taken.add(name)
    return name


def wav_problem(head: bytes, size: int) -> str:
    """Why a stored file cannot be a clip's WAV audio ("" when it can), from its first
    bytes and its size: empty, not RIFF/WAVE, or shorter than its header says."""
    if size == 0:
        return "the audio file is empty"
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return "the audio file is not a WAV file"
    declared = int.from_bytes(head[4:8], "little")
    # 0 and 0xFFFFFFFF are what a writer leaves when it could not seek back (a pipe)
    if declared not in (0, 0xFFFFFFFF) and declared + 8 > size:
        return (
            f"the audio file is truncated: its header says {declared + 8:,} bytes, it has {size:,}"
        )
    return ""


def _copy_audio(
    archive: ArchiveWriter, storage: Storage, name: str, path: str, copy_to: Path | None
) -> str:
    """Streams the stored audio `name` into the archive as `path`; returns why it could not
    ("" when it did). Nothing is written for a file found wanting."""
    try:
        handle = storage.open(name, "rb")
    except FileNotFoundError:
        return "the audio file is missing from storage"
    except OSError as exc:
        return f"the audio file cannot be read: {exc}"
    with handle:
        try:
            size = int(handle.size)
            head = handle.read(CHUNK_BYTES)
        except OSError as exc:
            return f"the audio file cannot be read: {exc}"
        problem = wav_problem(head, size)
        if problem:
            return problem

        def chunks() -> Iterator[bytes]:
            yield head
            yield from iter(lambda: handle.read(CHUNK_BYTES), b"")

        archive.add_chunks(path, chunks(), size=size, deflate=False, copy_to=copy_to)
    return ""


def _never_fetched(clip_id: int) -> str:
    status = Clip.objects.filter(pk=clip_id).values_list("status", flat=True).first()
    return f"no audio stored (the clip is {status or 'gone'})"


class MissingAudio:
    """missing_audio.csv: one row per clip left out, with why."""

    def __init__(self, out: Path) -> None:
        self.file = TextFile(out, MISSING_AUDIO_FILE)
        self.writer = formats.csv_writer(self.file, line_end="\n")
        self.writer.writerow(MISSING_AUDIO_HEADER)
        self.count = 0

    def add(self, split: str, group: list[CaptionRow], name: str, reason: str) -> None:
        row = group[0]
        source_id = row.youtube_id or row.original_name
        self.writer.writerow([split, row.clip_id, row.source, source_id, name, len(group), reason])
        self.count += 1


def label_names() -> dict[str, str]:
    return dict(Label.objects.values_list("mid", "name"))


def write_split(
    *,
    snapshot: Snapshot,
    split: str,
    archive: ArchiveWriter,
    out: Path,
    tally: stats.Tally,
    names: dict[str, str],
    missing: MissingAudio,
    copy_audio: bool,
    clip_done: Callable[[], None],
) -> SplitAudio:
    """One split's audio, its metadata files and (Clotho layout) its caption CSV."""
    layout = layout_of(snapshot)
    folder = audio_folder(layout, split)
    hf_split = formats.HF_SPLITS[split]
    storage = Clip.audio.field.storage
    copy_to = out if copy_audio else None
    metadata = TextFile(out, f"{folder}/metadata.jsonl")
    clotho_csv = clotho_meta = None
    if layout == "clotho":
        width = clotho_width(snapshot.project, split) or 5
        captions_file = TextFile(out, formats.CLOTHO_FILES[split])
        clotho_csv = formats.csv_writer(captions_file, line_end=formats.CLOTHO_LINE_END)
        clotho_csv.writerow(formats.clotho_header(width))
        meta_file = TextFile(out, f"clotho_metadata_{folder}.csv")
        clotho_meta = formats.csv_writer(meta_file, line_end=formats.CLOTHO_LINE_END)
        clotho_meta.writerow(CLOTHO_METADATA_HEADER)
    taken: set[str] = set()
    result = SplitAudio(
        facts=SplitFacts(hf_split, folder, "", 0, 0, 0), captions_file=None, text_files=[]
    )
    clips = captions = left_out = 0
    try:
        with export_reads():
            for group in clip_grouped_rows(snapshot.project, split, labels=True):
                row = group[0]
                name = _unique(audio_file_name(row), row.clip_id, taken)
                path = f"{folder}/{name}"
                reason = (
                    _copy_audio(archive, storage, row.audio, path, copy_to)
                    if row.audio
                    else _never_fetched(row.clip_id)
                )
                clip_done()
                if reason:
                    taken.discard(name)
                    missing.add(split, group, name, reason)
                    left_out += 1
                    continue
                texts = [r.text(snapshot.text) for r in group]
                for text in texts:
                    tally.add(split=split, clip_id=row.clip_id, text=text)
                source_id = row.youtube_id or row.original_name
                label_text = ";".join(row.labels)
                name_text = ";".join(names.get(m, m) for m in row.labels)
                record = {
                    "file_name": name,
                    "captions": texts,
                    "caption_ids": [r.caption_id for r in group],
                    "clip_id": row.clip_id,
                    "source": row.source,
                    "source_id": source_id,
                    "start_seconds": float(row.start),
                    "end_seconds": float(row.end),
                    "labels": label_text,
                    "label_names": name_text,
                    "split": hf_split,
                    "licence": snapshot.licence,
                }
                metadata.write(_JSON_LINE.encode(record) + "\n")
                if clotho_csv is not None and clotho_meta is not None:
                    clotho_csv.writerow([name, *texts, *[""] * (width - len(texts))])
                    clotho_meta.writerow(
                        [
                            name,
                            row.clip_id,
                            row.source,
                            source_id,
                            formats.seconds_text(row.start),
                            formats.seconds_text(row.end),
                            label_text,
                            name_text,
                            snapshot.licence,
                        ]
                    )
                result.paths[row.clip_id] = path
                clips += 1
                captions += len(texts)
    finally:
        metadata.close()
        if layout == "clotho":
            captions_file.close()
            meta_file.close()
    if clips:  # a folder without audio would be a split of nothing to `datasets`
        result.text_files.append(metadata)
    else:
        metadata.local.unlink()
        if not any(metadata.local.parent.iterdir()):
            metadata.local.parent.rmdir()
    caption_file = formats.split_file_name(snapshot.format, split)
    if layout == "clotho":
        result.text_files.append(meta_file)
        result.captions_file = {
            **captions_file.entry(),
            "split": split,
            "captions": captions,
            "clips": clips,
        }
    result.facts = SplitFacts(hf_split, folder, caption_file, clips, captions, left_out)
    return result
