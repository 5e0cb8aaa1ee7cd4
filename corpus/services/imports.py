"""Importing AudioCaps and Clotho caption lists into a project: the clips they name, the
project's import subset with its splits, and the captions as approved and "imported"."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count

from annotation.models import Caption
from core.bulk import allocate_ids, insert_rows
from core.models import Job, Project
from core.progress import ProgressFn, no_progress
from corpus import formats
from corpus.formats import CorpusFileError
from corpus.models import CorpusFormat, CorpusImport
from curation.models import Clip, Split, Subset, SubsetClip

IMPORT_MAX_BYTES = 200 * 1024 * 1024  # AudioCaps train is 3.6 MB; Clotho 1.3 MB
LOOKUP_CHUNK = 900  # ids per IN (...) clause, well under SQLite's variable limit


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


SUBSET_NAMES = {
    CorpusFormat.AUDIOCAPS: "AudioCaps (imported)",
    CorpusFormat.CLOTHO: "Clotho (imported)",
    CorpusFormat.LABEL_STUDIO: "Label Studio (imported)",
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
    progress: ProgressFn = no_progress,
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
        subset = import_subset(project, fmt)
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
        import_subset_report(subset)
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


def import_subset(project: Project, fmt: str) -> Subset:
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
        # audio is imported, and end_seconds keeps the model's default meanwhile. The
        # clips are the project's own: their names and captions are its data.
        new = [
            {"source": Clip.Source.LOCAL, "original_name": name, "project_id": subset.project_id}
            for name in keys
            if name not in found
        ]
    ids = allocate_ids(Clip, len(new))
    insert_rows(Clip, [{**values, "id": pk} for values, pk in zip(new, ids, strict=True)])
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
    insert_rows(
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
    """Stores the captions the project has not imported before; the file's clips are in
    `subset` by now. Captions are the project's own: another project's import of the same
    AudioCaps clip is neither found here nor touched."""
    clip_ids = set(clip_pks.values())
    rows = Caption.objects.filter(
        provenance=Caption.Provenance.IMPORTED,
        imported_into=subset.project_id,
        clip__subsetclip__subset=subset,
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
                    "imported_into_id": subset.project_id,
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
    insert_rows(Caption, new)
    return len(new), len(items) - len(new)


def import_subset_report(subset: Subset) -> None:
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
    *, job: Job, progress: ProgressFn, project_id: int, path: str, format: str, split: str
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
