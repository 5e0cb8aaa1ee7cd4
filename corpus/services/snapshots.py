"""Versioned export snapshots of a project's corpus: checking and numbering a request,
writing the split files (AudioCaps CSV, Clotho CSV or JSON lines), the manifest and the
statistics into a zip in storage, and serving its files."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import transaction
from django.db.models import Count, Max
from django.utils import timezone

from core.models import Job, Project
from core.progress import ProgressFn, no_progress
from corpus import formats, queries, stats
from corpus.models import CorpusStatistics, Snapshot
from corpus.services.rows import EXPORT_CHUNK, clip_grouped_rows, export_reads, split_rows
from corpus.services.statistics import statistics_data
from curation.models import Clip, Split, Subset


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
    *, project: Project, fmt: str, text: str, splits: list[str], created_by: User | None = None
) -> Snapshot:
    """Checks the request and numbers a new snapshot (state building); the snapshot_build
    job writes it."""
    with export_reads():
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
    *, project: Project, fmt: str, text: str, splits: list[str], created_by: User | None = None
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
            for row in split_rows(snapshot.project, split):
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
            for group in clip_grouped_rows(snapshot.project, split):
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
    for row in split_rows(snapshot.project, split, labels=True):
        text = row.text(snapshot.text)
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
            "text": text,
            "raw": row.raw,
            "processed": row.processed,
            "train_text": row.train_text,
            "tokens": row.tokens,
        }
        handle.write(_JSON_LINE.encode(record) + "\n")
        tally.add(split=split, clip_id=row.clip_id, text=text)
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
        with export_reads():
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
    *, snapshot: Snapshot, out_dir: Path | None = None, progress: ProgressFn = no_progress
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
        with export_reads():
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
            with export_reads():
                files.append(_write_split(snapshot, split, out, tally))
        progress(len(snapshot.splits), steps, "manifest and statistics")
        counts = {f["split"]: {"clips": f["clips"], "captions": f["captions"]} for f in files}
        statistics = statistics_data(
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
    *, job: Job, progress: ProgressFn, snapshot_id: int, out_dir: str = ""
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
