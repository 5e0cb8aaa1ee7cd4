"""Prediction and reference files for evaluation. No Django here.

Accepted shapes (`fmt`, or guessed from the extension and the CSV header):

    audiocaps  CSV ``audiocap_id,youtube_id,start_time,caption``, a caption a row; the clip
               key is "<youtube_id>_<start>" ("7fmOlUlwoNg_20")
    clotho     CSV ``file_name,caption_1,...,caption_N``; the key is the file name
    csv        CSV ``id,caption``, ``file_name,caption`` or DCASE's ``file_name,caption_predicted``
    json       a list of objects, jsonl one object a line: ``{"id": ..., "caption": ...}``;
               instead of "id", "file_name" or "youtube_id" + "start_time" (keyed as above);
               references may give ``"captions": [...]`` instead of one "caption"

References may repeat a key (one row per caption); predictions give one caption per key.
A bad file raises EvaluationFileError naming the file, the line (or JSON item) and why.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from corpus.formats import CorpusFileError, read_audiocaps, read_clotho, seconds_text

FORMATS = ("audiocaps", "clotho", "csv", "json", "jsonl")
MAX_CAPTION_CHARS = 2000
MAX_KEY_CHARS = 300
ID_COLUMNS = ("id", "file_name")
CAPTION_COLUMNS = ("caption", "caption_predicted")


class EvaluationFileError(ValueError):
    """A predictions or references file that cannot be read; the message says where."""


@dataclass(frozen=True)
class Row:
    where: str  # "line 3", "item 2": for messages
    key: str
    caption: str


def clip_key(youtube_id: str, start: Decimal | float | int | str) -> str:
    """The key of an AudioSet clip: "<youtube_id>_<start seconds>", as AudioCaps writes it."""
    return f"{youtube_id}_{seconds_text(Decimal(str(start)))}"


def read_references(path: Path | str, *, fmt: str | None = None) -> dict[str, list[str]]:
    """{clip key: [caption, ...]} in file order."""
    path = Path(path)
    out: dict[str, list[str]] = {}
    for row in read_rows(path, fmt=fmt):
        out.setdefault(row.key, []).append(row.caption)
    if not out:
        raise EvaluationFileError(f"{path}: no captions in the file")
    return out


def read_predictions(path: Path | str, *, fmt: str | None = None) -> dict[str, str]:
    """{clip key: caption}; a key given twice is an error naming both places."""
    path = Path(path)
    out = predictions_from_rows(read_rows(path, fmt=fmt), name=str(path))
    if not out:
        raise EvaluationFileError(f"{path}: no captions in the file")
    return out


def predictions_from_rows(rows: list[Row], *, name: str) -> dict[str, str]:
    seen: dict[str, str] = {}
    out: dict[str, str] = {}
    for row in rows:
        if row.key in seen:
            raise EvaluationFileError(
                f"{name}, {row.where}: a second prediction for {row.key!r} (first at "
                f"{seen[row.key]}); give one caption per clip"
            )
        seen[row.key] = row.where
        out[row.key] = row.caption
    return out


def read_rows(path: Path, *, fmt: str | None = None) -> list[Row]:
    if fmt is not None and fmt not in FORMATS:
        raise EvaluationFileError(f"Unknown format {fmt!r}; choose from {', '.join(FORMATS)}.")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EvaluationFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    name = str(path)
    fmt = fmt or _guess(path, data)
    try:
        if fmt == "audiocaps":
            return [
                Row(f"line {r.line}", clip_key(r.youtube_id, r.start), r.caption)
                for r in read_audiocaps(data, name=name)
            ]
        if fmt == "clotho":
            return [
                Row(f"line {r.line}", r.file_name, caption)
                for r in read_clotho(data, name=name)
                for caption in r.captions
            ]
    except CorpusFileError as exc:
        raise EvaluationFileError(str(exc)) from None
    text = _decode(data, name)
    if fmt == "csv":
        return list(_csv_rows(text, name))
    if fmt == "json":
        return _json_rows(text, name)
    return _jsonl_rows(text, name)


def _guess(path: Path, data: bytes) -> str:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix != ".csv":
        raise EvaluationFileError(
            f"{path}: cannot tell the format from the name; use a .csv, .json or .jsonl file "
            f"or name the format ({', '.join(FORMATS)})"
        )
    first = data.split(b"\n", 1)[0].removeprefix(b"\xef\xbb\xbf").strip()
    if first.startswith(b"audiocap_id,"):
        return "audiocaps"
    if first.startswith(b"file_name,caption_1"):
        return "clotho"
    return "csv"


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise EvaluationFileError(
            f"{name}, line {line}: not UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from None


def check_row(name: str, where: str, key: Any, caption: Any) -> Row:
    """A checked row; `name` and `where` say where it came from in error messages."""
    if isinstance(key, bool) or not isinstance(key, str | int):
        raise EvaluationFileError(f"{name}, {where}: the id must be a string or a number")
    key = str(key).strip()
    if not key:
        raise EvaluationFileError(f"{name}, {where}: the id is empty")
    if len(key) > MAX_KEY_CHARS:
        raise EvaluationFileError(
            f"{name}, {where}: the id has {len(key)} characters (at most {MAX_KEY_CHARS})"
        )
    if not isinstance(caption, str):
        raise EvaluationFileError(f"{name}, {where}: the caption must be a string")
    if not caption.strip():
        raise EvaluationFileError(f"{name}, {where}: the caption is empty")
    if len(caption) > MAX_CAPTION_CHARS:
        raise EvaluationFileError(
            f"{name}, {where}: the caption has {len(caption)} characters "
            f"(at most {MAX_CAPTION_CHARS})"
        )
    return Row(where, key, caption)


def _csv_rows(text: str, name: str) -> Iterator[Row]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    header: list[str] | None = None
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise EvaluationFileError(f"{name}, line {start}: bad CSV quoting ({exc})") from None
        where, start = f"line {start}", reader.line_num + 1
        if header is None:
            header = [cell.strip() for cell in cells]
            if len(header) != 2 or header[0] not in ID_COLUMNS or header[1] not in CAPTION_COLUMNS:
                raise EvaluationFileError(
                    f"{name}, line 1: header is {','.join(header)!r}; expected "
                    "'id,caption', 'file_name,caption', 'file_name,caption_predicted', "
                    "AudioCaps' 'audiocap_id,youtube_id,start_time,caption' or Clotho's "
                    "'file_name,caption_1,...'"
                )
            continue
        if not cells:
            continue  # a blank line
        if len(cells) != 2:
            raise EvaluationFileError(
                f"{name}, {where}: {len(cells)} columns, expected 2 ({','.join(header)}); "
                "quote a caption that holds a comma"
            )
        yield check_row(name, where, cells[0], cells[1])
    if header is None:
        raise EvaluationFileError(f"{name}, line 1: empty file")


def _json_rows(text: str, name: str) -> list[Row]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"{name}, line {exc.lineno}"
        raise EvaluationFileError(f"{where}: not valid JSON ({exc.msg})") from None
    if not isinstance(items, list):
        raise EvaluationFileError(
            f'{name}: expected a JSON list of objects like {{"id": ..., "caption": ...}}'
        )
    return [row for n, item in enumerate(items, 1) for row in _object_rows(item, name, f"item {n}")]


def _jsonl_rows(text: str, name: str) -> list[Row]:
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvaluationFileError(
                f"{name}, line {number}: not valid JSON ({exc.msg})"
            ) from None
        rows.extend(_object_rows(item, name, f"line {number}"))
    return rows


def _object_rows(item: Any, name: str, where: str) -> list[Row]:
    if not isinstance(item, dict):
        raise EvaluationFileError(
            f'{name}, {where}: expected an object {{"id": ..., "caption": ...}}'
        )
    key = _object_key(item, name, where)
    if "captions" in item:
        captions = item["captions"]
        if not isinstance(captions, list) or not captions:
            raise EvaluationFileError(f'{name}, {where}: "captions" must be a non-empty list')
        return [check_row(name, where, key, caption) for caption in captions]
    if "caption" not in item:
        raise EvaluationFileError(f'{name}, {where}: no "caption" (or "captions") field')
    return [check_row(name, where, key, item["caption"])]


def _object_key(item: dict[str, Any], name: str, where: str) -> Any:
    if "id" in item:
        return item["id"]
    if "file_name" in item:
        return item["file_name"]
    if "youtube_id" in item and "start_time" in item:
        youtube_id, start = item["youtube_id"], item["start_time"]
        try:
            seconds = Decimal(str(start))
        except InvalidOperation:
            seconds = Decimal("NaN")
        if not isinstance(youtube_id, str) or not seconds.is_finite() or seconds < 0:
            raise EvaluationFileError(
                f"{name}, {where}: youtube_id must be a string and start_time a number of seconds"
            )
        return clip_key(youtube_id, seconds)
    raise EvaluationFileError(
        f'{name}, {where}: no "id" (or "file_name", or "youtube_id" and "start_time") field'
    )
