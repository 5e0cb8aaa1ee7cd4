"""Streaming reader for AudioSet segment lists. No database access here.

Official files: three `#` header lines, then `YTID, start_seconds, end_seconds, "mid,mid"`.
A spreadsheet re-save (CRLF, whole seconds, labels unquoted and spread over trailing,
often empty, columns) carries the same information and is read the same way.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path

from core.encodings import SNIFF_BYTES, utf16_refusal

YOUTUBE_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")
LABEL_ID = re.compile(r"^/[a-z]/[0-9a-z_]+$")
MAX_SEGMENT_SECONDS = Decimal(60)
# Clip.start_seconds and end_seconds are numeric(9, 3)
MAX_SECONDS = Decimal("999999.999")

# (line, YouTube id, start ms, end ms, label ids in file order without repeats)
Segment = tuple[int, str, int, int, tuple[str, ...]]

# the fast path's caches are cleared past this size, so memory stays flat on any input
_CACHE_LIMIT = 50_000


class SegmentFormatError(ValueError):
    """A row that cannot be read; the message names the file and line."""


def _seconds(raw: str, what: str) -> Decimal:
    try:
        value = Decimal(raw.strip())
    except InvalidOperation:
        raise ValueError(f"{what} {raw.strip()!r} is not a number") from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"{what} {raw.strip()!r} is not a non-negative time")
    if value > MAX_SECONDS:
        raise ValueError(f"{what} {raw.strip()!r} is more than {MAX_SECONDS} s")
    return value.quantize(Decimal("0.001"))


def parse_row(fields: list[str]) -> tuple[str, int, int, tuple[str, ...]]:
    """Reads one row the careful way; every message about a bad row comes from here.
    Times come back in integer milliseconds."""
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
    return youtube_id, int(start * 1000), int(end * 1000), _labels(fields[3:])


def _labels(fields: list[str]) -> tuple[str, ...]:
    labels = []
    for field in fields:
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
    return tuple(labels)


def _label_text(fields: list[str]) -> str:
    """The label columns as one comma-separated string. Spaces and commas at either end
    only make empty pieces or pad the outer ids, which `_labels` drops anyway; the
    spreadsheet layout ends its rows with them."""
    text = fields[3] if len(fields) == 4 else ",".join(fields[3:])
    return text.strip(" ,")


def read_segments(path: Path, *, fast: bool = True) -> Iterator[Segment]:
    """Yields segments one by one (memory stays flat); raises SegmentFormatError.

    Rows in the official layout whose pieces were seen before take a fast path: a time
    string read once is looked up, not parsed again, and labels that already passed the
    checks are only split. Anything else goes through `parse_row`, so both paths accept
    the same rows and give the same values. `fast=False` reads every row carefully (the
    tests compare the two).
    """
    with path.open("rb") as head:
        if refusal := utf16_refusal(head.read(SNIFF_BYTES)):
            raise SegmentFormatError(f"{path.name}: the file {refusal}")
    times: dict[str, int] = {}  # "30.000" -> 30000
    plain_labels: set[str] = set()  # label ids that passed LABEL_ID as written
    youtube_id_ok = re.compile(r"[A-Za-z0-9_-]{11}").fullmatch
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle, skipinitialspace=True)
        try:
            for fields in reader:
                if fast and len(fields) >= 4:
                    youtube_id = fields[0]
                    start = times.get(fields[1])
                    end = times.get(fields[2])
                    labels = _label_text(fields).split(",")
                    unique = set(labels)
                    if (
                        start is not None
                        and end is not None
                        and start < end <= start + 60_000
                        and len(unique) == len(labels)
                        and unique <= plain_labels
                        and youtube_id_ok(youtube_id)
                    ):
                        yield reader.line_num, youtube_id, start, end, tuple(labels)
                        continue
                line = reader.line_num
                if not fields or not "".join(fields).strip() or fields[0].lstrip().startswith("#"):
                    continue
                try:
                    youtube_id, start, end, labels_read = parse_row(fields)
                except ValueError as exc:
                    raise SegmentFormatError(f"{path.name}, line {line}: {exc}") from None
                if len(times) > _CACHE_LIMIT:
                    times.clear()
                times[fields[1]] = start
                times[fields[2]] = end
                if len(plain_labels) > _CACHE_LIMIT:
                    plain_labels.clear()
                # only ids that needed no stripping or quote removal may skip the checks
                plain_labels.update(
                    label for label in _label_text(fields).split(",") if label in labels_read
                )
                yield line, youtube_id, start, end, labels_read
        except csv.Error as exc:
            raise SegmentFormatError(f"{path.name}, line {reader.line_num}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise SegmentFormatError(f"{path.name}: not UTF-8 text ({exc.reason})") from None


def count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))
