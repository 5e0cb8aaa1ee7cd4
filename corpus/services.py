"""Corpus workflows: importing AudioCaps and Clotho caption lists, building versioned
export snapshots, and computing corpus statistics."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.files import File
from django.core.files.base import ContentFile
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Count, Max
from django.utils import timezone

from annotation.models import Caption
from core.models import Project
from corpus import formats, queries, stats
from corpus.formats import CorpusFileError
from corpus.models import CorpusFormat, CorpusImport, CorpusStatistics, Snapshot
from curation.models import Clip, Label, Split, Subset, SubsetClip

# bulk INSERT (COPY on PostgreSQL) as the segment import does it, not a copy of it
from curation.services import _insert_many

log = logging.getLogger(__name__)

ProgressFn = Callable[..., None]
IMPORT_BATCH = 2000
EXPORT_CHUNK = 2000
IMPORT_MAX_BYTES = 200 * 1024 * 1024  # AudioCaps train is 3.6 MB; Clotho 1.3 MB
LOOKUP_CHUNK = 900  # ids per IN (...) clause, well under SQLite's variable limit


def _no_progress(*_: Any, **__: Any) -> None:
    pass


@contextmanager
def _export_reads() -> Iterator[None]:
    """Around the export's and statistics' big reads. On PostgreSQL they run in a
    transaction with JIT off: the OR of crowd joins and the import EXISTS is estimated
    costly enough to be JIT-compiled, which took 2.3 s of a 3.1 s query over 50k captions
    (the query itself runs in 0.8 s). SQLite needs nothing (and a transaction there
    would take the write lock)."""
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
        yield


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# Import ---------------------------------------------------------------------------------

SUBSET_NAMES = {
    CorpusFormat.AUDIOCAPS: "AudioCaps (imported)",
    CorpusFormat.CLOTHO: "Clotho (imported)",
}


@dataclass(frozen=True)
class _Item:
    """One caption of the file, ready to store."""

    line: int
    clip_key: Any  # (youtube_id, start) for AudioCaps, file_name for Clotho
    external_id: str
    text: str


def captions_import(
    *,
    project: Project,
    path: Path,
    fmt: str,
    split: str,
    imported_by: Any = None,
    progress: ProgressFn = _no_progress,
) -> CorpusImport:
    """Imports an AudioCaps or Clotho caption file into the project as approved captions
    (provenance "imported"), creating the clips it names and putting them into the
    project's import subset for that format with the given split.

    Idempotent: a clip or caption imported before (same clip, same external id) is found,
    not repeated. The whole file is checked first and written in one transaction, so a
    malformed file, a caption that changed since it was imported or a clip already in
    another split stops it with file, line and reason, and nothing is written.
    """
    path = Path(path)
    if fmt not in CorpusFormat.values:
        raise ValidationError(
            f"Unknown format {fmt!r}; use one of {', '.join(CorpusFormat.values)}."
        )
    if split not in Split.values:
        raise ValidationError(f"Unknown split {split!r}; use one of {', '.join(Split.values)}.")
    if not path.is_file():
        raise ValidationError(f"{path}: no such file")
    if path.stat().st_size > IMPORT_MAX_BYTES:
        raise ValidationError(f"{path.name}: larger than {IMPORT_MAX_BYTES // 2**20} MB")
    data = path.read_bytes()
    progress(0, 4, f"checking {path.name}")
    try:
        items = _read_items(data, fmt=fmt, name=path.name)
    except CorpusFileError as exc:
        raise ValidationError(f"{exc} — nothing was imported.") from None
    if not items:
        raise ValidationError(f"{path.name}: no captions after the header — nothing was imported.")
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)  # one import at a time
        subset = _import_subset(project, fmt)
        progress(1, 4, "clips")
        clip_pks, clips_created = _import_clips(items, fmt=fmt, subset=subset, split=split)
        progress(2, 4, "splits")
        _import_placement(items, clip_pks, subset=subset, split=split, name=path.name)
        progress(3, 4, "captions")
        created, existing = _import_captions(items, clip_pks, subset=subset, name=path.name)
        record = CorpusImport(
            project=project,
            subset=subset,
            format=fmt,
            split=split,
            file_name=path.name,
            sha256=hashlib.sha256(data).hexdigest(),
            rows=len({item.line for item in items}),
            clips_created=clips_created,
            captions_created=created,
            captions_existing=existing,
            imported_by=imported_by,
        )
        record.full_clean()
        record.save()
        _import_subset_report(subset)
    if connection.vendor == "postgresql" and (clips_created or created):
        # Fresh statistics for the planner: right after a 50k-row load, autovacuum has not
        # run yet and an export planned on "tables are empty" took six minutes, not one second.
        with connection.cursor() as cursor:
            tables = (Clip, SubsetClip, Caption)
            cursor.execute(
                f"ANALYZE {', '.join(connection.ops.quote_name(m._meta.db_table) for m in tables)}"
            )
    progress(4, 4, f"{created:,} captions imported, {existing:,} already there")
    return record


def _read_items(data: bytes, *, fmt: str, name: str) -> list[_Item]:
    if fmt == CorpusFormat.AUDIOCAPS:
        return [
            _Item(row.line, (row.youtube_id, row.start), row.audiocap_id, row.caption)
            for row in formats.read_audiocaps(data, name=name)
        ]
    return [
        _Item(row.line, row.file_name, formats.clotho_caption_id(row.file_name, n), text)
        for row in formats.read_clotho(data, name=name)
        for n, text in enumerate(row.captions, start=1)
    ]


def _import_subset(project: Project, fmt: str) -> Subset:
    """The project's subset for imports of this format, created on the first import."""
    earlier = CorpusImport.objects.filter(project=project, format=fmt).select_related("subset")
    if (found := earlier.first()) is not None:
        return found.subset
    slug = fmt if not project.subsets.filter(slug=fmt).exists() else f"{fmt}-imported"
    taken = set(project.subsets.filter(slug__startswith=slug).values_list("slug", flat=True))
    candidate, n = slug, 1
    while candidate in taken:
        n += 1
        candidate = f"{slug}-{n}"
    subset = Subset(
        project=project,
        name=SUBSET_NAMES[CorpusFormat(fmt)],
        slug=candidate,
        spec={"imported": fmt},
        report={"selected_clips": 0, "splits": {}},
    )
    subset.full_clean()
    subset.save()
    return subset


def _import_clips(
    items: list[_Item], *, fmt: str, subset: Subset, split: str
) -> tuple[dict[Any, int], int]:
    """clip key -> clip id for every clip the file names, creating the missing ones."""
    keys = list(dict.fromkeys(item.clip_key for item in items))
    is_youtube = fmt == CorpusFormat.AUDIOCAPS
    if is_youtube:
        found = _youtube_clip_pks(keys)
        new = [
            {
                "source": Clip.Source.YOUTUBE,
                "segment_list": Clip.SegmentList.UNBALANCED,  # every AudioCaps clip is from there
                "youtube_id": youtube_id,
                "start_seconds": start,
                "end_seconds": start + formats.AUDIOCAPS_CLIP_SECONDS,
            }
            for youtube_id, start in keys
            if (youtube_id, start) not in found
        ]
    else:
        found = _local_clip_pks(keys, subset, split)
        # The file names no duration; it is unknown (duration_seconds empty) until the
        # audio is imported, and end_seconds keeps the model's default meanwhile.
        new = [
            {"source": Clip.Source.LOCAL, "original_name": name}
            for name in keys
            if name not in found
        ]
    ids = _allocate_ids(Clip, len(new))
    _insert_rows(Clip, [{**values, "id": pk} for values, pk in zip(new, ids, strict=True)])
    for values, pk in zip(new, ids, strict=True):
        found[
            (values["youtube_id"], values["start_seconds"])
            if is_youtube
            else values["original_name"]
        ] = pk
    return found, len(new)


def _sql_in(column: str, values: list[Any]) -> tuple[str, list[Any]]:
    """`column IN (...)` and its parameters; on PostgreSQL `= ANY(%s)` with one array, which
    psycopg sends as it is instead of parsing 900 placeholders client-side."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [list(values)]
    return f"{column} IN ({', '.join(['%s'] * len(values))})", list(values)


def _youtube_clip_pks(keys: list[tuple[str, Decimal]]) -> dict[Any, int]:
    """(youtube_id, start) -> clip id of the clips that exist already. Plain SQL: the ORM
    spent more time preparing 50k ids for IN (...) than the database answering."""
    wanted = set(keys)
    found: dict[Any, int] = {}
    table, quote = Clip._meta.db_table, connection.ops.quote_name
    with connection.cursor() as cursor:
        for chunk in _chunks(sorted({youtube_id for youtube_id, _ in keys}), LOOKUP_CHUNK):
            among, values = _sql_in(quote("youtube_id"), chunk)
            cursor.execute(
                f"SELECT {quote('youtube_id')}, {quote('start_seconds')}, {quote('id')} "
                f"FROM {quote(table)} WHERE {quote('source')} = %s AND {among}",
                [Clip.Source.YOUTUBE.value, *values],
            )
            for youtube_id, start, pk in cursor.fetchall():
                key = (youtube_id, Decimal(str(start)))  # SQLite answers with a float
                if key in wanted:
                    found[key] = pk
    return found


def _local_clip_pks(names: list[str], subset: Subset, split: str) -> dict[Any, int]:
    """Clotho clips by file name within the split: Clotho reuses names across splits for
    different recordings ("City Ambience w_ Car Passing_1-2.wav" is in development and
    validation), so a name identifies a clip only together with its split."""
    found: dict[Any, int] = {}
    for chunk in _chunks(names, LOOKUP_CHUNK):
        rows = SubsetClip.objects.filter(
            subset=subset,
            split=split,
            clip__source=Clip.Source.LOCAL,
            clip__original_name__in=chunk,
        )
        found.update(rows.values_list("clip__original_name", "clip_id"))
    return found


def _import_placement(
    items: list[_Item], clip_pks: dict[Any, int], *, subset: Subset, split: str, name: str
) -> None:
    """Puts the file's clips into the import subset with the split; a clip already there
    in another split stops the import (a clip belongs to one split)."""
    first_line: dict[int, int] = {}
    for item in items:
        first_line.setdefault(clip_pks[item.clip_key], item.line)
    clip_ids = list(first_line)
    in_subset = SubsetClip.objects.filter(subset=subset).values_list("clip_id", "split")
    present = {c: s for c, s in in_subset.iterator(chunk_size=10_000) if c in first_line}
    clashes = sorted((first_line[c], s) for c, s in present.items() if s != split)
    if clashes:
        line, other = clashes[0]
        raise ValidationError(
            f"{name}, line {line}: this clip is already in the {other} split of subset "
            f"{subset.slug!r} ({len(clashes)} clips of this file are); a clip belongs to one "
            f"split, so import this file as --split {other} or fix it — nothing was imported."
        )
    _insert_rows(
        SubsetClip,
        [
            {"subset_id": subset.pk, "clip_id": c, "split": split}
            for c in clip_ids
            if c not in present
        ],
    )


def _import_captions(
    items: list[_Item], clip_pks: dict[Any, int], *, subset: Subset, name: str
) -> tuple[int, int]:
    """Stores the captions not imported before; the file's clips are in `subset` by now."""
    clip_ids = set(clip_pks.values())
    rows = Caption.objects.filter(
        provenance=Caption.Provenance.IMPORTED, clip__subsetclip__subset=subset
    ).values_list("clip_id", "external_id", "text")
    existing = {
        (clip, ext): text
        for clip, ext, text in rows.iterator(chunk_size=10_000)
        if clip in clip_ids
    }
    new: list[dict[str, Any]] = []
    for item in items:
        key = (clip_pks[item.clip_key], item.external_id)
        if key not in existing:
            new.append(
                {
                    "provenance": Caption.Provenance.IMPORTED,
                    "clip_id": key[0],
                    "text": item.text,
                    "external_id": item.external_id,
                }
            )
        elif existing[key] != item.text:
            raise ValidationError(
                f"{name}, line {item.line}: caption {item.external_id} was imported before "
                f"with different text ({existing[key][:60]!r}); captions are not replaced by "
                "an import — nothing was imported."
            )
    _insert_rows(Caption, new)
    return len(new), len(items) - len(new)


def _allocate_ids(model: Any, count: int) -> list[int]:
    """Primary keys for rows about to be inserted, so the import needs no second lookup to
    learn them. PostgreSQL hands them out from the id sequence; on SQLite the import's
    transaction holds the write lock (IMMEDIATE mode), so max(id) + 1 onwards is safe."""
    if count == 0:
        return []
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [table, count],
            )
            return [row[0] for row in cursor.fetchall()]
        cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {connection.ops.quote_name(table)}")
        first = cursor.fetchone()[0] + 1
        return list(range(first, first + count))


def _insert_rows(model: Any, rows: list[dict[str, Any]]) -> None:
    """Inserts rows given as {attname: value}; every other column gets its model default,
    prepared by its own field, so the SQL follows the model as it grows. bulk_create spent
    two thirds of a 50k-caption import preparing model instances (15 s of 24)."""
    if not rows:
        return
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and "id" not in rows[0])]
    by_name = {f.attname: f for f in fields}
    db = connections[DEFAULT_DB_ALIAS]  # not the `connection` proxy: a lookup per value
    default = {f.attname: f.get_db_prep_save(f.get_default(), db) for f in fields}
    given = list(rows[0])
    unknown = set(given) - set(by_name)
    if unknown:
        raise ValueError(f"{model.__name__} has no column(s) {', '.join(sorted(unknown))}")
    values = []
    for row in rows:
        record = dict(default)
        for name in given:
            record[name] = by_name[name].get_db_prep_save(row[name], db)
        values.append([record[f.attname] for f in fields])
    for chunk in _chunks(values, IMPORT_BATCH):
        _insert_many(model._meta.db_table, [f.column for f in fields], chunk)


def _import_subset_report(subset: Subset) -> None:
    """Keeps the subset page's counts (clips per split) right after each import."""
    per_split = dict(
        SubsetClip.objects.filter(subset=subset)
        .values("split")
        .annotate(n=Count("pk"))
        .values_list("split", "n")
    )
    splits = {s: per_split.get(s, 0) for s in Split.values}
    subset.report = {**subset.report, "selected_clips": sum(splits.values()), "splits": splits}
    subset.save(update_fields=["report"])


def captions_import_job(
    *, job: Any, progress: ProgressFn, project_id: int, path: str, format: str, split: str
) -> dict[str, Any]:
    record = captions_import(
        project=Project.objects.get(pk=project_id),
        path=Path(path),
        fmt=format,
        split=split,
        imported_by=job.created_by,
        progress=progress,
    )
    return {
        "subset": record.subset.slug,
        "rows": record.rows,
        "clips_created": record.clips_created,
        "captions_created": record.captions_created,
        "captions_existing": record.captions_existing,
    }


# Export snapshots -----------------------------------------------------------------------


def snapshot_check(*, project: Project, fmt: str, text: str, splits: list[str]) -> None:
    """Refuses, with what to do, an export that cannot be built as asked."""
    if fmt not in Snapshot.Format.values:
        raise ValidationError(
            f"Unknown export format {fmt!r}; use one of {', '.join(Snapshot.Format.values)}."
        )
    if text not in Snapshot.Text.values:
        raise ValidationError(f"Unknown text {text!r}; use raw or processed.")
    unknown = [s for s in splits if s not in Split.values]
    if not splits or unknown:
        raise ValidationError(
            f"Choose splits among {', '.join(Split.values)}"
            + (f" ({', '.join(map(str, unknown))} is not one)." if unknown else ".")
        )
    if text == Snapshot.Text.PROCESSED:
        if not queries.processed_available():
            raise ValidationError(
                "Processed text needs the post-processing app (ProcessedCaption), which is not "
                "installed here; export raw text instead."
            )
        missing = sum(
            queries.unprocessed(queries.approved_captions(project, split)).count()
            for split in splits
        )
        if missing:
            raise ValidationError(
                f"{missing:,} approved captions are not post-processed yet (or were fixed by "
                "a reviewer after it); run `python manage.py postprocess_captions --all` (or "
                "wait for the text queue) and export again, or export raw text."
            )
    if fmt == Snapshot.Format.AUDIOCAPS:
        local = sum(
            queries.approved_captions(project, split).filter(clip__source=Clip.Source.LOCAL).count()
            for split in splits
        )
        if local:
            raise ValidationError(
                f"{local:,} approved captions belong to local clips, which an AudioCaps CSV "
                "cannot name (it identifies clips by YouTube id and start time); export them "
                "as clotho or jsonl."
            )


def snapshot_create(
    *, project: Project, fmt: str, text: str, splits: list[str], created_by: Any = None
) -> Snapshot:
    """Checks the request and numbers a new snapshot (state building); the snapshot_build
    job writes it."""
    with _export_reads():
        snapshot_check(project=project, fmt=fmt, text=text, splits=splits)
    splits = [s for s in Split.values if s in set(splits)]  # train, val, test order
    with transaction.atomic():
        locked = Project.objects.select_for_update().get(pk=project.pk)
        last = Snapshot.objects.filter(project=locked).aggregate(v=Max("version"))["v"] or 0
        snapshot = Snapshot(
            project=locked,
            version=last + 1,
            format=fmt,
            text=text,
            splits=splits,
            created_by=created_by,
        )
        snapshot.full_clean()
        snapshot.save()
    return snapshot


def snapshot_start(
    *, project: Project, fmt: str, text: str, splits: list[str], created_by: Any = None
) -> Snapshot:
    """A new snapshot, built in the background by a snapshot_build job."""
    from core.services import job_enqueue

    with transaction.atomic():
        snapshot = snapshot_create(
            project=project, fmt=fmt, text=text, splits=splits, created_by=created_by
        )
        snapshot.job = job_enqueue(
            kind="snapshot_build",
            params={"snapshot_id": snapshot.pk},
            project=project,
            created_by=created_by,
            label=f"Export {project.slug} v{snapshot.version} ({fmt}, {text})",
        )
        snapshot.save(update_fields=["job"])
    return snapshot


# The columns every writer reads, in this order.
_ROW = (
    "pk",
    "external_id",
    "provenance",
    "text",
    "fixed_text",
    "clip_id",
    "clip__source",
    "clip__youtube_id",
    "clip__start_seconds",
    "clip__end_seconds",
    "clip__original_name",
    "clip__audio",
)
_PROCESSED = ("processed__final_text", "processed__train_text", "processed__tokens")


@dataclass(frozen=True)
class _Row:
    caption_id: int
    external_id: str
    provenance: str
    raw: str  # the text as written, with a reviewer's fix applied
    clip_id: int
    source: str
    youtube_id: str
    start: Decimal
    end: Decimal
    original_name: str
    audio: str
    processed: str | None
    train_text: str | None
    tokens: list[str] | None
    labels: list[str]  # the clip's AudioSet mids, when asked for

    def text(self, which: str) -> str:
        if which != Snapshot.Text.PROCESSED:
            return self.raw
        if self.processed is None:  # processed rows were checked: this one went meanwhile
            raise ValidationError(
                f"Caption {self.caption_id} lost its processed text during the export; "
                "export again."
            )
        return self.processed

    @property
    def audiocap_id(self) -> str:
        return self.external_id or str(self.caption_id)

    @property
    def file_name(self) -> str:
        """The Clotho file name of the clip: a local file's own name, else "<id>_<start>.wav"."""
        if self.original_name:
            return self.original_name
        return f"{self.youtube_id}_{formats.seconds_text(self.start)}.wav"


def _rows(qs: Any, *, processed: bool, labels: bool = False) -> Any:
    if labels:
        qs = qs.annotate(label_mids=queries.clip_label_mids())
    extra = (*(_PROCESSED if processed else ()), *(("label_mids",) if labels else ()))
    return qs.values_list(*_ROW, *extra)


def _as_row(values: tuple[Any, ...], *, processed: bool, labels: bool = False) -> _Row:
    pk, ext, provenance, text, fixed, clip_id, source, ytid, start, end, name, audio = values[:12]
    final, train, tokens = values[12:15] if processed else (None, None, None)
    mids = sorted(values[-1].split(",")) if labels and values[-1] else []
    return _Row(
        pk,
        ext,
        provenance,
        fixed or text,
        clip_id,
        source,
        ytid,
        start,
        end,
        name,
        audio or "",
        final,
        train,
        tokens,
        mids,
    )


def _split_rows(project: Project, split: str, *, labels: bool = False) -> Iterator[_Row]:
    """The split's approved captions in id order, streamed."""
    processed = queries.processed_available()
    rows = _rows(queries.approved_captions(project, split), processed=processed, labels=labels)
    return (
        _as_row(values, processed=processed, labels=labels)
        for values in rows.iterator(chunk_size=EXPORT_CHUNK)
    )


def _clotho_width(project: Project, split: str) -> int:
    """The most captions any clip of the split has: the Clotho file's caption columns."""
    per_clip = (
        queries.approved_captions(project, split)
        .order_by()
        .values("clip_id")
        .annotate(n=Count("pk"))
        .values_list("n", flat=True)
    )
    return max(per_clip.iterator(chunk_size=EXPORT_CHUNK), default=0)


def _clip_grouped_rows(project: Project, split: str) -> Iterator[list[_Row]]:
    """The split's captions grouped by clip (clips in the order of their first caption,
    each clip's captions in id order), streamed: one clip in memory at a time."""
    captions = queries.by_clip(queries.approved_captions(project, split))
    processed = queries.processed_available()
    rows = _rows(captions, processed=processed)
    group: list[_Row] = []
    for values in rows.iterator(chunk_size=EXPORT_CHUNK):
        row = _as_row(values, processed=processed)
        if group and group[0].clip_id != row.clip_id:
            yield group
            group = []
        group.append(row)
    if group:
        yield group


class _HashingWriter:
    """A text file that counts its bytes and hashes them as they are written."""

    def __init__(self, path: Path) -> None:
        self.handle = path.open("wb")
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, text: str) -> int:
        data = text.encode("utf-8")
        self.handle.write(data)
        self.sha256.update(data)
        self.size += len(data)
        return len(text)

    def close(self) -> None:
        self.handle.close()


def _clip_labels(project: Project, splits: list[str]) -> dict[int, list[str]]:
    """clip id -> AudioSet label mids (sorted) of the clips of the splits' approved captions."""
    labels: dict[int, list[str]] = defaultdict(list)
    for split in splits:
        clip_ids = queries.approved_captions(project, split).order_by().values("clip_id")
        links = Clip.labels.through.objects.filter(clip_id__in=clip_ids).order_by()
        for clip_id, mid in links.values_list("clip_id", "label__mid").iterator(10_000):
            labels[clip_id].append(mid)
    return {clip_id: sorted(set(mids)) for clip_id, mids in labels.items()}


def _write_split(snapshot: Snapshot, split: str, out: Path, tally: stats.Tally) -> dict[str, Any]:
    """Writes one split's file; returns its manifest entry."""
    text = snapshot.text
    name = {
        Snapshot.Format.AUDIOCAPS: f"{split}.csv",
        Snapshot.Format.CLOTHO: formats.CLOTHO_FILES.get(split, f"clotho_captions_{split}.csv"),
        Snapshot.Format.JSONL: f"{split}.jsonl",
    }[Snapshot.Format(snapshot.format)]
    handle = _HashingWriter(out / name)
    captions = 0
    clips: set[int] = set()
    try:
        if snapshot.format == Snapshot.Format.AUDIOCAPS:
            writer = formats.csv_writer(handle, line_end=formats.AUDIOCAPS_LINE_END)
            writer.writerow(formats.AUDIOCAPS_HEADER)
            for row in _split_rows(snapshot.project, split):
                value = row.text(text)
                writer.writerow(
                    [row.audiocap_id, row.youtube_id, formats.seconds_text(row.start), value]
                )
                tally.add(split=split, clip_id=row.clip_id, text=value)
                captions += 1
                clips.add(row.clip_id)
        elif snapshot.format == Snapshot.Format.CLOTHO:
            width = _clotho_width(snapshot.project, split) or 5
            writer = formats.csv_writer(handle, line_end=formats.CLOTHO_LINE_END)
            writer.writerow(formats.clotho_header(width))
            for group in _clip_grouped_rows(snapshot.project, split):
                values = [row.text(text) for row in group]
                writer.writerow([group[0].file_name, *values, *[""] * (width - len(values))])
                for value in values:
                    tally.add(split=split, clip_id=group[0].clip_id, text=value)
                captions += len(values)
                clips.add(group[0].clip_id)
        else:
            captions = _write_jsonl(snapshot, split, handle, tally, clips)
    finally:
        handle.close()
    return {
        "path": name,
        "split": split,
        "bytes": handle.size,
        "sha256": handle.sha256.hexdigest(),
        "captions": captions,
        "clips": len(clips),
    }


_JSON_LINE = json.JSONEncoder(ensure_ascii=False)


def _write_jsonl(
    snapshot: Snapshot, split: str, handle: _HashingWriter, tally: stats.Tally, clips: set[int]
) -> int:
    """One JSON object a caption, for training: the clip, its audio path in storage (empty
    until fetched), its AudioSet label mids, and the caption's raw and processed text."""
    captions = 0
    for row in _split_rows(snapshot.project, split, labels=True):
        record = {
            "caption_id": row.caption_id,
            "external_id": row.external_id or None,
            "provenance": row.provenance,
            "clip_id": row.clip_id,
            "audio": row.audio or None,
            "youtube_id": row.youtube_id or None,
            "start_seconds": float(row.start),
            "end_seconds": float(row.end),
            "file_name": row.file_name,
            "split": split,
            "labels": row.labels,
            "text": row.text(snapshot.text),
            "raw": row.raw,
            "processed": row.processed,
            "train_text": row.train_text,
            "tokens": row.tokens,
        }
        handle.write(_JSON_LINE.encode(record) + "\n")
        tally.add(split=split, clip_id=row.clip_id, text=record["text"])
        clips.add(row.clip_id)
        captions += 1
    return captions


def _manifest_context(snapshot: Snapshot) -> dict[str, Any]:
    """The recipes (subsets) and post-processing versions the snapshot's captions come from."""
    project = snapshot.project
    subsets = Subset.objects.filter(project=project).filter(
        pk__in=list(queries.import_subsets(project).values_list("pk", flat=True))
        + list(project.batches.values_list("subset_id", flat=True))
    )
    recipes = [
        {
            "subset": s.slug,
            "name": s.name,
            "recipe": s.recipe.slug if s.recipe else None,
            "spec": s.spec,
            "spec_sha256": hashlib.sha256(json.dumps(s.spec, sort_keys=True).encode()).hexdigest(),
            "built_at": s.built_at.isoformat(),
        }
        for s in subsets.select_related("recipe").order_by("pk")
    ]
    imports = [
        {
            "file_name": i.file_name,
            "sha256": i.sha256,
            "format": i.format,
            "split": i.split,
            "rows": i.rows,
            "imported_at": i.imported_at.isoformat(),
        }
        for i in project.corpus_imports.order_by("pk")
    ]
    versions: set[str] = set()
    if queries.processed_available():
        with _export_reads():
            for split in snapshot.splits:
                captions = queries.approved_captions(project, split).order_by()
                found = captions.values_list("processed__pipeline_version", flat=True)
                versions.update(v for v in found.distinct() if v)
    return {"recipes": recipes, "imports": imports, "pipeline_versions": sorted(versions)}


def _earmark_version() -> str:
    try:
        return metadata.version("earmark")
    except metadata.PackageNotFoundError:
        return "unknown"


def snapshot_build(
    *, snapshot: Snapshot, out_dir: Path | None = None, progress: ProgressFn = _no_progress
) -> Snapshot:
    """Writes the snapshot's files (streamed from the database, one chunk of captions at a
    time), its manifest and statistics, zips them into storage and marks it ready. With
    `out_dir` the files are also left there, unzipped. A failure marks the snapshot failed
    with the reason; a ready snapshot is never rebuilt."""
    if snapshot.state != Snapshot.State.BUILDING:
        raise ValidationError(
            f"Snapshot v{snapshot.version} is {snapshot.state}; it is not rebuilt."
        )
    try:
        # checked again: captions may have changed since the snapshot was requested
        with _export_reads():
            snapshot_check(
                project=snapshot.project,
                fmt=snapshot.format,
                text=snapshot.text,
                splits=snapshot.splits,
            )
        return _snapshot_write(snapshot, out_dir, progress)
    except Exception as exc:
        message = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        Snapshot.objects.filter(pk=snapshot.pk, state=Snapshot.State.BUILDING).update(
            state=Snapshot.State.FAILED,
            error=message or type(exc).__name__,
            finished_at=timezone.now(),
        )
        raise


def _snapshot_write(snapshot: Snapshot, out_dir: Path | None, progress: ProgressFn) -> Snapshot:
    work = Path(tempfile.mkdtemp(prefix="earmark-snapshot-"))
    out = Path(out_dir) if out_dir else work / "files"
    out.mkdir(parents=True, exist_ok=True)
    try:
        tally = stats.Tally()
        files = []
        steps = len(snapshot.splits) + 2
        for i, split in enumerate(snapshot.splits):
            progress(i, steps, f"writing {split}")
            with _export_reads():
                files.append(_write_split(snapshot, split, out, tally))
        progress(len(snapshot.splits), steps, "manifest and statistics")
        counts = {f["split"]: {"clips": f["clips"], "captions": f["captions"]} for f in files}
        statistics = _statistics_data(
            tally, project=snapshot.project, splits=snapshot.splits, text=snapshot.text
        )
        manifest = {
            "earmark_snapshot": 1,
            "project": snapshot.project.slug,
            "version": snapshot.version,
            "format": snapshot.format,
            "text": snapshot.text,
            "splits": snapshot.splits,
            "created_at": snapshot.created_at.isoformat(),
            "finished_at": timezone.now().isoformat(),
            "earmark_version": _earmark_version(),
            "counts": counts,
            "files": files,
            **_manifest_context(snapshot),
            "statistics": {k: statistics[k] for k in ("word_rule", "splits", "all")},
        }
        (out / "manifest.json").write_text(
            json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
        )
        archive = work / "archive.zip"
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            for entry in [*files, {"path": "manifest.json"}]:
                zf.write(out / entry["path"], arcname=entry["path"])
        progress(len(snapshot.splits) + 1, steps, "storing the archive")
        archive_sha = hashlib.sha256()
        with archive.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                archive_sha.update(block)
        stem = f"{snapshot.project.slug}-v{snapshot.version}-{snapshot.format}-{snapshot.text}"
        stored = ""
        try:
            with transaction.atomic():
                locked = Snapshot.objects.select_for_update().get(pk=snapshot.pk)
                if locked.state != Snapshot.State.BUILDING:
                    raise ValidationError(f"Snapshot v{locked.version} is {locked.state} already.")
                with archive.open("rb") as handle:
                    locked.archive.save(f"{stem}.zip", File(handle), save=False)
                stored = locked.archive.name
                locked.archive_sha256 = archive_sha.hexdigest()
                locked.manifest = manifest
                locked.counts = counts
                locked.state = Snapshot.State.READY
                locked.finished_at = timezone.now()
                locked.save()
                CorpusStatistics.objects.create(
                    project=locked.project, snapshot=locked, data=statistics, job=locked.job
                )
        except Exception:
            if stored:  # no row points at it: keep storage free of orphans
                Snapshot.archive.field.storage.delete(stored)
            raise
        progress(steps, steps, f"{sum(c['captions'] for c in counts.values()):,} captions")
        return locked
    finally:
        shutil.rmtree(work, ignore_errors=True)


def snapshot_build_job(
    *, job: Any, progress: ProgressFn, snapshot_id: int, out_dir: str = ""
) -> dict[str, Any]:
    snapshot = Snapshot.objects.select_related("project").get(pk=snapshot_id)
    if snapshot.job_id is None:
        Snapshot.objects.filter(pk=snapshot.pk).update(job=job)
        snapshot.job = job
    built = snapshot_build(
        snapshot=snapshot, out_dir=Path(out_dir) if out_dir else None, progress=progress
    )
    return {
        "snapshot": built.version,
        "format": built.format,
        "text": built.text,
        "captions": built.total_captions,
        "archive_sha256": built.archive_sha256,
    }


def snapshot_file_names(*, snapshot: Snapshot) -> list[str]:
    return [str(f["path"]) for f in snapshot.files] + ["manifest.json"]


def snapshot_file_chunks(*, snapshot: Snapshot, path: str) -> Iterator[bytes]:
    """One file of a ready snapshot, streamed out of its archive. Call it before the
    response starts: an unknown name raises ValidationError at once."""
    if snapshot.state != Snapshot.State.READY or path not in snapshot_file_names(snapshot=snapshot):
        raise ValidationError(f"Snapshot v{snapshot.version} has no file {path!r}.")
    stored = snapshot.archive.open("rb")

    def chunks() -> Iterator[bytes]:
        try:
            with zipfile.ZipFile(stored) as archive, archive.open(path) as member:
                yield from iter(lambda: member.read(64 * 1024), b"")
        finally:
            stored.close()

    return chunks()


# Statistics -----------------------------------------------------------------------------


def _label_names(mids: set[str]) -> dict[str, str]:
    return dict(Label.objects.filter(mid__in=mids).values_list("mid", "name"))


def _statistics_data(
    tally: stats.Tally, *, project: Project, splits: list[str], text: str
) -> dict[str, Any]:
    with _export_reads():
        clip_labels = _clip_labels(project, splits)
    names = _label_names({m for mids in clip_labels.values() for m in mids})
    return {"text": text, **tally.summary(clip_labels=clip_labels, label_names=names)}


def _pos_pipeline() -> tuple[Any | None, str]:
    """(spaCy pipeline, "") or (None, why not)."""
    try:
        from postprocessing.nlp import pos_pipeline
    except ImportError:
        return None, "needs a spaCy pipeline (post-processing's NLP module is not installed)"
    try:
        nlp = pos_pipeline()
    except Exception as exc:  # spaCy raises OSError for a missing package, others its own
        return None, f"needs a spaCy pipeline: {exc}"
    if nlp is None:
        return None, "needs a spaCy pipeline (none is configured)"
    return nlp, ""


def _pipeline_name(nlp: Any) -> str:
    meta = getattr(nlp, "meta", {}) or {}
    return f"{meta.get('lang', '?')}_{meta.get('name', '?')}-{meta.get('version', '?')}"


def _with_pos(data: dict[str, Any], texts: Callable[[], Iterator[str]]) -> dict[str, Any]:
    nlp, reason = _pos_pipeline()
    if nlp is None:
        return {**data, "pos": None, "pos_unavailable": reason}
    return {**data, "pos": {"pipeline": _pipeline_name(nlp), **stats.pos_counts(texts(), nlp)}}


def statistics_compute(
    *,
    project: Project,
    snapshot: Snapshot | None = None,
    with_pos: bool = True,
    job: Any = None,
    progress: ProgressFn = _no_progress,
) -> CorpusStatistics:
    """Computes and stores the statistics of the project's corpus now, or of a snapshot
    (read back from its archive, so they describe exactly what was exported), with the
    parts of speech when a spaCy pipeline is available; the charts are drawn when first
    shown (statistics_chart)."""
    if snapshot is not None and snapshot.state != Snapshot.State.READY:
        raise ValidationError(f"Snapshot v{snapshot.version} is {snapshot.state}, not ready.")
    progress(0, 3, "counting")
    if snapshot is None:
        tally = stats.Tally()
        for split in Split.values:
            with _export_reads():
                for row in _split_rows(project, split):
                    tally.add(split=split, clip_id=row.clip_id, text=row.raw)
        data = _statistics_data(
            tally, project=project, splits=list(Split.values), text=Snapshot.Text.RAW
        )

        def texts() -> Iterator[str]:
            for split in Split.values:
                with _export_reads():
                    yield from (row.raw for row in _split_rows(project, split))
    else:
        earlier = snapshot.statistics.order_by("computed_at").first()
        data = dict(earlier.data) if earlier else {}

        def texts() -> Iterator[str]:
            yield from _snapshot_texts(snapshot)

    progress(1, 3, "parts of speech" if with_pos else "storing")
    if with_pos:
        data = _with_pos(data, texts)
    else:
        data = {**data, "pos": None, "pos_unavailable": "not computed (asked without POS)"}
    data = _with_analytics(data, texts, _clip_texts(project, snapshot))
    progress(2, 3, "storing")
    record = CorpusStatistics(project=project, snapshot=snapshot, data=data, job=job)
    record.save()
    progress(3, 3, "done")
    return record


def _clip_texts(project: Project, snapshot: Snapshot | None) -> Callable[[], Iterator[Any]]:
    """(clip id, caption) pairs of the live corpus or of a JSON-lines snapshot (the other
    formats carry no clip ids: nothing)."""

    def pairs() -> Iterator[tuple[int, str]]:
        if snapshot is None:
            for split in Split.values:
                with _export_reads():
                    yield from ((row.clip_id, row.raw) for row in _split_rows(project, split))
        elif snapshot.format == Snapshot.Format.JSONL:
            with zipfile.ZipFile(snapshot.archive.open("rb")) as archive:
                for entry in snapshot.files:
                    with archive.open(str(entry["path"])) as raw:
                        for line in raw:
                            record = json.loads(line)
                            yield int(record["clip_id"]), str(record["text"])

    return pairs


def _with_analytics(
    data: dict[str, Any],
    texts: Callable[[], Iterator[str]],
    clip_texts: Callable[[], Iterator[Any]],
) -> dict[str, Any]:
    """ARS (with an image-caption word-frequency table, ARS_IMAGE_WORD_FREQUENCIES) and SCR
    (with speech transcripts, SCR_TRANSCRIPTS), each only when its input exists; otherwise
    the reason is kept for the page."""
    from django.conf import settings

    from corpus import analytics

    table = getattr(settings, "ARS_IMAGE_WORD_FREQUENCIES", "")
    if not table:
        data = {**data, "ars": None, "ars_unavailable": "no image-caption word-frequency table"}
    else:
        nlp, reason = _pos_pipeline()
        if nlp is None:
            data = {**data, "ars": None, "ars_unavailable": reason}
        else:
            try:
                image = analytics.lemmatise_table(analytics.read_word_frequencies(table), nlp)
            except analytics.AnalyticsInputError as exc:
                data = {**data, "ars": None, "ars_unavailable": str(exc)}
            else:
                captions = analytics.content_lemmas(texts(), nlp)
                ars = analytics.audio_relevance(captions, image)
                data = {**data, "ars": {**ars, "table": Path(table).name}}
    source = getattr(settings, "SCR_TRANSCRIPTS", "")
    if not source:
        return {**data, "scr": None, "scr_unavailable": "no speech transcripts"}
    try:
        transcripts = _transcripts_by_clip(Path(source))
    except ValidationError as exc:
        return {**data, "scr": None, "scr_unavailable": "; ".join(exc.messages)}
    scr = analytics.corpus_speech_coverage(clip_texts(), transcripts)
    if not scr["captions"]:
        return {**data, "scr": None, "scr_unavailable": "no caption's clip has a transcript"}
    return {**data, "scr": {**scr, "transcripts": Path(source).name}}


def _transcripts_by_clip(path: Path) -> dict[int, str]:
    """A JSON object {clip key: transcript}; a key is a clip's id, YouTube id or original
    file name."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{path.name}: cannot read the transcripts ({exc})") from None
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise ValidationError(f"{path.name}: expected a JSON object of clip -> transcript text")
    out: dict[int, str] = {}
    ids = {int(k) for k in raw if k.isdigit()}
    for pk in Clip.objects.filter(pk__in=ids).values_list("pk", flat=True):
        out[pk] = raw[str(pk)]
    names = [k for k in raw if not k.isdigit()]
    for pk, youtube_id in Clip.objects.filter(youtube_id__in=names).values_list("pk", "youtube_id"):
        out.setdefault(pk, raw[youtube_id])
    for pk, name in Clip.objects.filter(original_name__in=names).values_list("pk", "original_name"):
        out.setdefault(pk, raw[name])
    return out


def _snapshot_texts(snapshot: Snapshot) -> Iterator[str]:
    """Every caption text of a snapshot, read from its archive."""
    import csv
    import io

    with zipfile.ZipFile(snapshot.archive.open("rb")) as archive:
        for entry in snapshot.files:
            with archive.open(str(entry["path"])) as raw:
                lines = io.TextIOWrapper(raw, encoding="utf-8", newline="")
                if snapshot.format == Snapshot.Format.JSONL:
                    for line in lines:
                        yield json.loads(line)["text"]
                    continue
                reader = csv.reader(lines)
                next(reader, None)
                for row in reader:
                    if snapshot.format == Snapshot.Format.AUDIOCAPS:
                        yield row[3]
                    else:
                        yield from (cell for cell in row[1:] if cell)


def statistics_compute_job(
    *, job: Any, progress: ProgressFn, project_id: int, snapshot_id: int | None = None
) -> dict[str, Any]:
    project = Project.objects.get(pk=project_id)
    snapshot = Snapshot.objects.get(pk=snapshot_id, project=project) if snapshot_id else None
    record = statistics_compute(project=project, snapshot=snapshot, job=job, progress=progress)
    every = record.data.get("all", {})
    pos = record.data.get("pos") or {}
    return {
        "statistics": record.pk,
        "captions": every.get("captions", 0),
        "vocabulary": every.get("vocabulary", 0),
        "nouns": pos.get("nouns"),
        "pos_unavailable": record.data.get("pos_unavailable", ""),
        "ars": (record.data.get("ars") or {}).get("mean"),
        "scr": (record.data.get("scr") or {}).get("mean"),
    }


CHARTS = {
    "lengths": ("length_chart", stats.length_chart),
    "labels": ("label_chart", stats.label_chart),
}


def statistics_chart(*, record: CorpusStatistics, kind: str) -> Any:
    """The record's chart ("lengths" or "labels") as a stored file, drawn on first use
    (snapshot builds store the numbers only, to stay fast)."""
    if kind not in CHARTS:
        raise ValidationError(f"Unknown chart {kind!r}; use one of {', '.join(CHARTS)}.")
    field, draw = CHARTS[kind]
    stored = getattr(record, field)
    if not stored:
        project = record.project
        title = f"{project.slug} v{record.snapshot.version}" if record.snapshot else project.slug
        stem = f"{project.slug}-{record.pk}-{kind}"
        stored.save(f"{stem}.png", ContentFile(draw(record.data, title=title)), save=False)
        record.save(update_fields=[field])
    return stored
