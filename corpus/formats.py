"""Reading and writing the caption list formats of existing corpora. No Django here.

AudioCaps (cdjkim/audiocaps): ``audiocap_id,youtube_id,start_time,caption``, one caption a
row, CRLF line endings, a clip is (YouTube id, start) and lasts 10 s.
Clotho (v1/v2): ``file_name,caption_1,...,caption_5``, one audio file a row, LF endings.

Readers check the whole file before anything is written and raise CorpusFileError naming
the file, the line and the reason. Writers use the csv module's minimal quoting, which is
how both corpora were written: a file read here and written back is byte-for-byte the same.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from annotation import rules
from core.encodings import SNIFF_BYTES, utf16_refusal
from core.text import SafeCsvWriter, file_name_problem

AUDIOCAPS_HEADER = ["audiocap_id", "youtube_id", "start_time", "caption"]
AUDIOCAPS_LINE_END = "\r\n"
AUDIOCAPS_CLIP_SECONDS = Decimal(10)
CLOTHO_LINE_END = "\n"
# Clotho v2's file names per split; the test split was released as "evaluation"
CLOTHO_FILES = {
    "train": "clotho_captions_development.csv",
    "val": "clotho_captions_validation.csv",
    "test": "clotho_captions_evaluation.csv",
}
# Clotho's audio folders per split, named as its caption files are
CLOTHO_AUDIO_FOLDERS = {"train": "development", "val": "validation", "test": "evaluation"}
# Hugging Face's split names (its audiofolder loader recognises these folder names)
HF_SPLITS = {"train": "train", "val": "validation", "test": "test"}
MAX_CAPTION_CHARS = 500  # annotation.Caption.MAX_CHARS; kept here so this module needs no Django
MAX_FILE_NAME_CHARS = 300  # curation.Clip.original_name

_YOUTUBE_ID = re.compile(r"[A-Za-z0-9_-]{11}")
_SECONDS = re.compile(r"\d{1,6}(\.\d{1,3})?")
_CLOTHO_CAPTION_COLUMN = re.compile(r"caption_(\d+)")


class CorpusFileError(ValueError):
    """A file that is not a well-formed caption list; the message names file and line."""


@dataclass(frozen=True)
class AudioCapsRow:
    line: int
    audiocap_id: str
    youtube_id: str
    start: Decimal
    caption: str


@dataclass(frozen=True)
class ClothoRow:
    line: int
    file_name: str
    captions: tuple[str, ...]


def _decode(data: bytes, name: str) -> str:
    if refusal := utf16_refusal(data[:SNIFF_BYTES]):
        raise CorpusFileError(f"{name}, line 1: the file {refusal}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CorpusFileError(
            f"{name}, line {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); save the file as UTF-8"
        ) from None
    # a spreadsheet's byte-order mark is not part of the header
    return text.removeprefix("\ufeff")


def _rows(data: bytes, name: str) -> Iterator[tuple[int, list[str]]]:
    """(first line of the row, cells) for every CSV row; strict quoting."""
    reader = csv.reader(io.StringIO(_decode(data, name), newline=""), strict=True)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise CorpusFileError(
                f"{name}, line {reader.line_num}: bad CSV quoting ({exc})"
            ) from None
        yield start, row
        start = reader.line_num + 1


def _check_caption(name: str, line: int, text: str, column: str) -> None:
    if not text.strip():
        raise CorpusFileError(f"{name}, line {line}: {column} is empty")
    if "\n" in text or "\r" in text:
        raise CorpusFileError(f"{name}, line {line}: {column} spans several lines")
    # the text gate's rules for what no caption holds, as written and once normalised: a
    # NUL (which PostgreSQL refuses to store), other control characters, line separators,
    # text-direction controls, markup, a start a spreadsheet would run as a formula
    if problems := rules.gate(text):
        raise CorpusFileError(f"{name}, line {line}: {column} {problems[0].message}")
    if len(text) > MAX_CAPTION_CHARS:
        raise CorpusFileError(
            f"{name}, line {line}: {column} has {len(text)} characters "
            f"(at most {MAX_CAPTION_CHARS})"
        )


def _header(rows: Iterator[tuple[int, list[str]]], name: str, expected: str) -> list[str]:
    try:
        _, header = next(rows)
    except StopIteration:
        raise CorpusFileError(
            f"{name}, line 1: empty file (expected the header {expected})"
        ) from None
    return header


def read_audiocaps(data: bytes, *, name: str = "file") -> list[AudioCapsRow]:
    """Every row of an AudioCaps caption CSV, checked; CorpusFileError on the first fault."""
    rows = _rows(data, name)
    expected = ",".join(AUDIOCAPS_HEADER)
    header = _header(rows, name, expected)
    if header != AUDIOCAPS_HEADER:
        raise CorpusFileError(
            f"{name}, line 1: header is {','.join(header)!r}, expected {expected!r}"
        )
    out: list[AudioCapsRow] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        if len(row) != 4:
            raise CorpusFileError(
                f"{name}, line {line}: {len(row)} columns, expected 4 ({expected})"
            )
        audiocap_id, youtube_id, start, caption = row
        if not audiocap_id.isascii() or not audiocap_id.isdigit():
            raise CorpusFileError(
                f"{name}, line {line}: audiocap_id {audiocap_id!r} is not a whole number"
            )
        if audiocap_id in seen:
            raise CorpusFileError(
                f"{name}, line {line}: audiocap_id {audiocap_id} repeats line {seen[audiocap_id]}"
            )
        seen[audiocap_id] = line
        if not _YOUTUBE_ID.fullmatch(youtube_id):
            raise CorpusFileError(
                f"{name}, line {line}: youtube_id {youtube_id!r} is not an 11-character YouTube id"
            )
        if not _SECONDS.fullmatch(start):
            raise CorpusFileError(
                f"{name}, line {line}: start_time {start!r} is not a number of seconds"
            )
        _check_caption(name, line, caption, "caption")
        out.append(AudioCapsRow(line, audiocap_id, youtube_id, Decimal(start), caption))
    return out


def read_clotho(data: bytes, *, name: str = "file") -> list[ClothoRow]:
    """Every row of a Clotho caption CSV, checked; CorpusFileError on the first fault."""
    rows = _rows(data, name)
    header = _header(rows, name, "file_name,caption_1,...")
    numbers = [_CLOTHO_CAPTION_COLUMN.fullmatch(c) for c in header[1:]]
    if (
        not header
        or header[0] != "file_name"
        or len(header) < 2
        or [int(m.group(1)) if m else None for m in numbers] != list(range(1, len(header)))
    ):
        raise CorpusFileError(
            f"{name}, line 1: header is {','.join(header)!r}, expected "
            "'file_name,caption_1,caption_2,...' (Clotho)"
        )
    width = len(header)
    out: list[ClothoRow] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        if len(row) != width:
            raise CorpusFileError(
                f"{name}, line {line}: {len(row)} columns, expected {width} "
                f"(file_name and {width - 1} captions)"
            )
        file_name, *captions = row
        if not file_name.strip():
            raise CorpusFileError(f"{name}, line {line}: file_name is empty")
        if "/" in file_name or "\\" in file_name or len(file_name) > MAX_FILE_NAME_CHARS:
            raise CorpusFileError(
                f"{name}, line {line}: file_name {file_name[:80]!r} must be a plain file name "
                f"of at most {MAX_FILE_NAME_CHARS} characters"
            )
        if problem := file_name_problem(file_name):
            raise CorpusFileError(f"{name}, line {line}: file_name {file_name!r}: {problem}")
        if file_name in seen:
            raise CorpusFileError(
                f"{name}, line {line}: file_name {file_name!r} repeats line {seen[file_name]}"
            )
        seen[file_name] = line
        for number, caption in enumerate(captions, start=1):
            _check_caption(name, line, caption, f"caption_{number}")
        out.append(ClothoRow(line, file_name, tuple(captions)))
    return out


def clotho_caption_id(file_name: str, number: int) -> str:
    """The stable id of a Clotho caption: its file and column ("a.wav#3")."""
    return f"{file_name}#{number}"


def seconds_text(value: Decimal | float | int) -> str:
    """Seconds as AudioCaps writes them: "20", "12.5" (never "20.000" or "2E+1")."""
    return format(Decimal(value).normalize(), "f")


def csv_writer(handle: Any, *, line_end: str) -> SafeCsvWriter:
    """Every export's CSV writer: each cell through core.text.spreadsheet_cell, so no
    caption, file name, label or reason opens as a formula in a spreadsheet."""
    return SafeCsvWriter(handle, lineterminator=line_end)


def split_file_name(fmt: str, split: str) -> str:
    """A snapshot's caption file for one split, by export format (audiocaps, clotho, jsonl)."""
    if fmt == "clotho":
        return CLOTHO_FILES.get(split, f"clotho_captions_{split}.csv")
    return f"{split}.csv" if fmt == "audiocaps" else f"{split}.jsonl"


def clotho_header(width: int) -> list[str]:
    return ["file_name", *(f"caption_{n}" for n in range(1, width + 1))]
