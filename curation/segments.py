"""Streaming reader for AudioSet segment lists. No database access here.

Official files: three `#` header lines, then `YTID, start_seconds, end_seconds, "mid,mid"`.
A spreadsheet re-save (CRLF, whole seconds, labels unquoted and spread over trailing,
often empty, columns) carries the same information and is read the same way.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

YOUTUBE_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")
LABEL_ID = re.compile(r"^/[a-z]/[0-9a-z_]+$")
MAX_SEGMENT_SECONDS = Decimal(60)


class SegmentFormatError(ValueError):
    """A row that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Segment:
    line: int
    youtube_id: str
    start: Decimal
    end: Decimal
    label_ids: tuple[str, ...]


def _seconds(raw: str, what: str) -> Decimal:
    try:
        value = Decimal(raw.strip())
    except InvalidOperation:
        raise ValueError(f"{what} {raw.strip()!r} is not a number") from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"{what} {raw.strip()!r} is not a non-negative time")
    return value.quantize(Decimal("0.001"))


def parse_row(fields: list[str]) -> tuple[str, Decimal, Decimal, tuple[str, ...]]:
    if len(fields) < 4:
        raise ValueError(f"expected 4 columns (YTID, start, end, labels), found {len(fields)}")
    youtube_id = fields[0].strip()
    if not YOUTUBE_ID.match(youtube_id):
        raise ValueError(f"{youtube_id!r} is not a YouTube id (11 characters of A-Z a-z 0-9 _ -)")
    start = _seconds(fields[1], "start")
    end = _seconds(fields[2], "end")
    if end <= start:
        raise ValueError(f"end {end} is not after start {start}")
    if end - start > MAX_SEGMENT_SECONDS:
        raise ValueError(f"segment lasts {end - start} s, more than {MAX_SEGMENT_SECONDS} s")
    labels = []
    for field in fields[3:]:
        for label in field.split(","):
            label = label.strip().strip('"').strip()
            if not label:
                continue
            if not LABEL_ID.match(label):
                raise ValueError(f"{label!r} is not an AudioSet label id like /m/09x0r")
            if label not in labels:
                labels.append(label)
    if not labels:
        raise ValueError("no labels")
    return youtube_id, start, end, tuple(labels)


def read_segments(path: Path) -> Iterator[Segment]:
    """Yields segments one by one (memory stays flat); raises SegmentFormatError."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle, skipinitialspace=True)
        try:
            for fields in reader:
                line = reader.line_num
                if not fields or not "".join(fields).strip() or fields[0].lstrip().startswith("#"):
                    continue
                try:
                    yield Segment(line, *parse_row(fields))
                except ValueError as exc:
                    raise SegmentFormatError(f"{path.name}, line {line}: {exc}") from None
        except csv.Error as exc:
            raise SegmentFormatError(f"{path.name}, line {reader.line_num}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise SegmentFormatError(f"{path.name}: not UTF-8 text ({exc.reason})") from None


def count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))
