"""Importing AudioSet segment lists (CSV) into clips and their label links: staged
through COPY and set-based SQL on PostgreSQL, in looked-up batches on SQLite."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction

from core.bulk import allocate_ids, insert_many
from core.models import Job
from core.progress import ProgressFn, no_progress
from curation.models import Clip, Label
from curation.segments import SegmentFormatError, count_lines, read_segments
from curation.services.ontology import label_counts_refresh

SEGMENT_BATCH = 5000
SEGMENT_STAGE = "segment_stage"
# a staged row `s` and its clip `c`; the parameter is Clip.Source.YOUTUBE
_STAGED_CLIP = (
    "c.source = %s AND c.youtube_id = s.youtube_id AND c.start_seconds = s.start_ms / 1000.0"
)
_LINK_TABLE = Clip.labels.through._meta.db_table


def segments_import(
    *,
    path: Path,
    segment_list: str,
    progress: ProgressFn = no_progress,
    batch_size: int = SEGMENT_BATCH,
) -> dict[str, int]:
    """Streams an AudioSet segment CSV into clips and their labels.

    One transaction per file: a malformed row (or an unknown label) stops the import with
    the file, line and reason, and nothing from that file is kept; so does a file with no
    segment at all (empty, only comments, or UTF-16 text). Clips are de-duplicated
    by (YouTube id, start) within the file and against earlier imports; a repeated segment
    keeps the end of its first row and gains the union of its labels. Memory holds one
    batch at a time.

    The result counts rows, clips created, clips that existed before the file, rows that
    repeat a segment met earlier in the file, and the label links the rows name.
    """
    path = Path(path)
    if segment_list not in Clip.SegmentList.values:
        raise ValidationError(
            f"Unknown segment list {segment_list!r}; "
            f"use one of {', '.join(Clip.SegmentList.values)}."
        )
    if not path.is_file():
        raise ValidationError(f"{path}: no such file")
    label_pks = dict(Label.objects.values_list("mid", "pk"))
    if not label_pks:
        raise ValidationError("No ontology loaded; run import_ontology first.")
    total_lines = count_lines(path)
    stats = {
        "rows": 0,
        "clips_created": 0,
        "clips_existing": 0,
        "repeated_rows": 0,
        "label_links": 0,
    }
    importer = (
        _segments_import_staged if connection.vendor == "postgresql" else _segments_import_batched
    )
    try:
        with transaction.atomic():
            importer(
                path=path,
                segment_list=segment_list,
                label_pks=label_pks,
                stats=stats,
                progress=lambda line: progress(line, total_lines, f"{stats['rows']:,} rows"),
                batch_size=batch_size,
            )
            if stats["rows"] == 0:
                raise SegmentFormatError(
                    f"{path.name}: no segments (the file is empty or holds only comment "
                    "lines); expected rows of YTID, start_seconds, end_seconds, labels"
                )
            # the ontology page's cached counts, inside the file's transaction so that a
            # failed import leaves the old ones
            label_counts_refresh()
    except SegmentFormatError as exc:
        raise ValidationError(f"{exc} — nothing from this file was imported.") from None
    progress(total_lines, total_lines, f"{stats['rows']:,} rows")
    return stats


def _unknown_labels(
    path: Path, line: int, labels: Iterable[str], label_pks: dict[str, Any]
) -> SegmentFormatError:
    unknown = [m for m in labels if m not in label_pks]
    return SegmentFormatError(
        f"{path.name}, line {line}: label id(s) {', '.join(unknown)} "
        "are not in the imported ontology"
    )


def _segments_import_staged(
    *,
    path: Path,
    segment_list: str,
    label_pks: dict[str, int],
    stats: dict[str, int],
    progress: Callable[[int], None],
    batch_size: int,
) -> None:
    """PostgreSQL: every row goes by COPY into a temporary table, then set-based
    statements add the links of clips imported before (ON CONFLICT DO NOTHING) and the new
    clips with their links (INSERT … RETURNING). The database de-duplicates against the
    file and earlier imports in one pass, where a lookup per batch cost as much as the
    inserts."""
    stage = SEGMENT_STAGE
    pk_text = {mid: str(pk) for mid, pk in label_pks.items()}
    with connection.cursor() as cursor:
        # ON COMMIT DROP covers the top-level transaction; the explicit DROP below lets a
        # second import run inside the same outer transaction (tests, callers' atomic()).
        cursor.execute(
            f"CREATE TEMPORARY TABLE {stage} (line integer NOT NULL, youtube_id text NOT NULL,"
            " start_ms integer NOT NULL, end_ms integer NOT NULL, label_ids bigint[] NOT NULL)"
            " ON COMMIT DROP"
        )
        rows = links = 0
        chunk: list[str] = []
        for line, youtube_id, start, end, labels in read_segments(path):
            try:
                pks = ",".join([pk_text[m] for m in labels])
            except KeyError:
                raise _unknown_labels(path, line, labels, label_pks) from None
            # ids match [A-Za-z0-9_-]{11}, so no value needs COPY escaping
            chunk.append(f"{line}\t{youtube_id}\t{start}\t{end}\t{{{pks}}}\n")
            links += len(labels)
            if len(chunk) >= batch_size:
                _copy_text(cursor, stage, chunk)
                rows += len(chunk)
                chunk = []
                stats["rows"] = rows
                progress(line)
        _copy_text(cursor, stage, chunk)
        rows += len(chunk)
        stats["rows"], stats["label_links"] = rows, links
        # the planner knows nothing of a temporary table's contents until it is analyzed
        cursor.execute(f"ANALYZE {stage}")
        cursor.execute(
            f"SELECT count(*) FROM (SELECT DISTINCT youtube_id, start_ms FROM {stage}) d"
        )
        segments = cursor.fetchone()[0]
        # first the clips imported before this file: they keep their links and gain the
        # new ones, so only these links need ON CONFLICT, which costs a third more
        cursor.execute(
            f"WITH found AS MATERIALIZED (SELECT c.id, s.label_ids FROM {stage} s"
            f"  JOIN {Clip._meta.db_table} c ON {_STAGED_CLIP}),"
            f" added AS (INSERT INTO {_LINK_TABLE} (clip_id, label_id)"
            "  SELECT f.id, l.label_id FROM found f"
            "  CROSS JOIN LATERAL unnest(f.label_ids) AS l(label_id)"
            "  ON CONFLICT (clip_id, label_id) DO NOTHING)"
            " SELECT count(DISTINCT id) FROM found",
            [Clip.Source.YOUTUBE],
        )
        existing = cursor.fetchone()[0]
        created = _insert_staged_clips(cursor, stage, segment_list, repeats=rows > segments)
        if existing + created != segments:
            # Another transaction committed some of these segments in between; the clip
            # insert skipped them, so their links go in now, the slow and general way.
            cursor.execute(
                f"INSERT INTO {_LINK_TABLE} (clip_id, label_id)"
                f" SELECT c.id, l.label_id FROM {stage} s"
                f" JOIN {Clip._meta.db_table} c ON {_STAGED_CLIP}"
                " CROSS JOIN LATERAL unnest(s.label_ids) AS l(label_id)"
                " ON CONFLICT (clip_id, label_id) DO NOTHING",
                [Clip.Source.YOUTUBE],
            )
        stats["clips_created"] = created
        stats["clips_existing"] = segments - created
        stats["repeated_rows"] = rows - segments
        cursor.execute(f"DROP TABLE {stage}")


def _copy_text(cursor: Any, table: str, lines: list[str]) -> None:
    """One COPY per batch, closed before progress is reported: the report may go through
    this same connection (see core.services.Progress), which a COPY in flight blocks."""
    if lines:
        with cursor.cursor.copy(f"COPY {table} FROM STDIN") as copy:
            copy.write("".join(lines))


def _insert_staged_clips(cursor: Any, stage: str, segment_list: str, *, repeats: bool) -> int:
    """Adds the staged segments that are not clips yet, with their label links; returns
    how many. Rows go in file order, so ids follow the file and a repeated segment keeps
    its first row's end (ON CONFLICT DO NOTHING skips the later ones, and clips imported
    before). Every other column gets its model default, prepared by its own field, so the
    SQL follows the model as it grows. The links of new clips cannot exist yet: only
    `repeats` (rows naming a segment twice) can name one twice."""
    given = {"source": Clip.Source.YOUTUBE, "segment_list": segment_list}
    staged = {
        "youtube_id": "s.youtube_id",
        "start_seconds": "s.start_ms / 1000.0",
        "end_seconds": "s.end_ms / 1000.0",
    }
    columns, values, params = [], [], []
    for field in Clip._meta.concrete_fields:
        if field.primary_key:
            continue
        columns.append(connection.ops.quote_name(field.column))
        if field.attname in staged:
            values.append(staged[field.attname])
            continue
        # typed, or PostgreSQL reads a parameter in a SELECT list as text
        values.append(f"%s::{field.db_type(connection)}")
        params.append(
            field.get_db_prep_save(given.get(field.attname, field.get_default()), connection)
        )
    on_conflict = " ON CONFLICT (clip_id, label_id) DO NOTHING" if repeats else ""
    cursor.execute(
        f"WITH new AS (INSERT INTO {Clip._meta.db_table} ({', '.join(columns)})"
        f"  SELECT {', '.join(values)} FROM {stage} s ORDER BY s.line"
        "  ON CONFLICT (youtube_id, start_seconds) WHERE source = 'youtube' DO NOTHING"
        "  RETURNING id, youtube_id, start_seconds),"
        f" added AS (INSERT INTO {_LINK_TABLE} (clip_id, label_id)"
        f"  SELECT c.id, l.label_id FROM new c JOIN {stage} s"
        "   ON c.youtube_id = s.youtube_id AND c.start_seconds = s.start_ms / 1000.0"
        f"  CROSS JOIN LATERAL unnest(s.label_ids) AS l(label_id){on_conflict})"
        " SELECT count(*) FROM new",
        params,
    )
    return int(cursor.fetchone()[0])


def _segments_import_batched(
    *,
    path: Path,
    segment_list: str,
    label_pks: dict[str, int],
    stats: dict[str, int],
    progress: Callable[[int], None],
    batch_size: int,
) -> None:
    """SQLite: batches of segments, each looked up, then inserted. Slower than the staged
    path, and a segment repeated across batches counts as existing, not repeated."""
    batch: dict[tuple[str, int], list[Any]] = {}
    for line, youtube_id, start, end, labels in read_segments(path):
        stats["rows"] += 1
        stats["label_links"] += len(labels)
        try:
            pks = {label_pks[m] for m in labels}
        except KeyError:
            raise _unknown_labels(path, line, labels, label_pks) from None
        key = (youtube_id, start)
        if key in batch:
            stats["repeated_rows"] += 1
            batch[key][1].update(pks)
            continue
        batch[key] = [end, pks]
        if len(batch) >= batch_size:
            _flush_segments(batch, segment_list, stats)
            batch = {}
            progress(line)
    _flush_segments(batch, segment_list, stats)


def _flush_segments(
    batch: dict[tuple[str, int], list[Any]], segment_list: str, stats: dict[str, int]
) -> None:
    if not batch:
        return
    existing = _clip_pks(batch)
    new_keys = [key for key in batch if key not in existing]
    new_ids = allocate_ids(Clip, len(new_keys))
    _insert_youtube_clips(
        [
            (clip_id, youtube_id, _seconds(start), _seconds(batch[(youtube_id, start)][0]))
            for clip_id, (youtube_id, start) in zip(new_ids, new_keys, strict=True)
        ],
        segment_list,
    )
    pks = {**existing, **dict(zip(new_keys, new_ids, strict=True))}
    # (clip pk, label pk) links of new clips, and of clips imported before
    fresh: list[tuple[int, int]] = []
    known: list[tuple[int, int]] = []
    for key, (_, labels) in batch.items():
        (known if key in existing else fresh).extend((pks[key], label) for label in labels)
    link_table = Clip.labels.through._meta.db_table
    insert_many(link_table, ["clip_id", "label_id"], fresh)
    # a segment imported before keeps its links and gains the new ones
    insert_many(link_table, ["clip_id", "label_id"], known, suffix=" ON CONFLICT DO NOTHING")
    stats["clips_created"] += len(new_keys)
    stats["clips_existing"] += len(batch) - len(new_keys)


def _seconds(milliseconds: int) -> Decimal:
    return Decimal(milliseconds).scaleb(-3)


def _clip_pks(batch: dict[tuple[str, int], Any]) -> dict[tuple[str, int], int]:
    rows = Clip.objects.filter(
        source=Clip.Source.YOUTUBE, youtube_id__in={youtube_id for youtube_id, _ in batch}
    ).values_list("youtube_id", "start_seconds", "pk")
    found = {(youtube_id, int(start * 1000)): pk for youtube_id, start, pk in rows}
    return {key: pk for key, pk in found.items() if key in batch}


def _insert_youtube_clips(rows: list[tuple[int, str, Decimal, Decimal]], segment_list: str) -> None:
    """Inserts clips through the cursor: bulk_create spent most of a 2 M-row import
    preparing 19 columns per object. Every column still gets its model default,
    prepared by its own field, so the SQL follows the model as it grows."""
    if not rows:
        return
    fields = list(Clip._meta.concrete_fields)
    given = {"source": Clip.Source.YOUTUBE, "segment_list": segment_list}
    template = {
        f.attname: f.get_db_prep_save(given.get(f.attname, f.get_default()), connection)
        for f in fields
    }
    by_name = {f.attname: f for f in fields}
    varying = ("id", "youtube_id", "start_seconds", "end_seconds")
    values = []
    for row in rows:
        record = dict(template)
        for name, value in zip(varying, row, strict=True):
            record[name] = by_name[name].get_db_prep_save(value, connection)
        values.append([record[f.attname] for f in fields])
    insert_many(Clip._meta.db_table, [f.column for f in fields], values)


def segments_import_job(
    *, job: Job, progress: ProgressFn, path: str, segment_list: str
) -> dict[str, int]:
    return segments_import(path=Path(path), segment_list=segment_list, progress=progress)
