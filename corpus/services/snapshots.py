"""Versioned export snapshots of a project's corpus: checking and numbering a request,
writing the split files (AudioCaps CSV, Clotho CSV or JSON lines) and, for an audio
snapshot, the clips' audio with a dataset card (corpus.services.snapshot_audio), the
manifest and the statistics into a zip in storage, and serving its files.

The archive is streamed into storage under a temporary key (`snapshots/partial/…`) and
moved to its final key inside the transaction that marks the snapshot ready, so a build
killed before that commit leaves only a temporary key, which the snapshots sweep
(corpus.services.janitor) removes, never a half-written archive under a real name."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
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
from django.core.files.storage import Storage
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from annotation.models import Batch
from core.models import Job, Project
from core.progress import ProgressFn, no_progress
from corpus import datacard, formats, queries, stats
from corpus.archive import ArchiveWriter, TextFile
from corpus.models import CorpusStatistics, Snapshot
from corpus.services.rows import (
    clip_grouped_rows,
    clotho_width,
    export_reads,
    split_rows,
)
from corpus.services.snapshot_audio import (
    MISSING_AUDIO_FILE,
    MissingAudio,
    label_names,
    layout_of,
    write_split,
)
from corpus.services.statistics import statistics_data
from crowd.models import BatchRequirements
from curation.models import Clip, Split, Subset

log = logging.getLogger(__name__)

# Where archives are written before their snapshot is committed ready; the snapshots sweep
# removes what a killed build left here.
PARTIAL_DIR = "snapshots/partial"
SHA256SUMS = "SHA256SUMS"
CARD = "README.md"


def snapshot_check(
    *,
    project: Project,
    fmt: str,
    text: str,
    splits: list[str],
    licence: str = Snapshot.Licence.CC_BY_4,
) -> None:
    """Refuses, with what to do, an export that cannot be built as asked."""
    if licence not in Snapshot.Licence.values:
        raise ValidationError(
            f"Unknown licence {licence!r}; use one of {', '.join(Snapshot.Licence.values)}."
        )
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
        local = _local_captions(project, splits)
        if local:
            raise ValidationError(
                f"{local:,} approved captions belong to local clips, which an AudioCaps CSV "
                "cannot name (it identifies clips by YouTube id and start time); export them "
                "as clotho or jsonl."
            )


def _local_captions(project: Project, splits: list[str]) -> int:
    """Approved captions of local clips in `splits`: an AudioCaps CSV cannot name them."""
    return sum(
        queries.approved_captions(project, split).filter(clip__source=Clip.Source.LOCAL).count()
        for split in splits
    )


def snapshot_default_format(*, project: Project) -> str:
    """The export format the new-snapshot form starts on: AudioCaps CSV unless some approved
    caption is of a local clip, which only Clotho CSV (by file name) and JSON lines name;
    then Clotho CSV, so the form's defaults export as they stand."""
    if _local_captions(project, Split.values):
        return Snapshot.Format.CLOTHO
    return Snapshot.Format.AUDIOCAPS


def snapshot_create(
    *,
    project: Project,
    fmt: str,
    text: str,
    splits: list[str],
    created_by: User | None = None,
    with_audio: bool = False,
    licence: str = Snapshot.Licence.CC_BY_4,
) -> Snapshot:
    """Checks the request and numbers a new snapshot (state building); the snapshot_build
    job writes it. `with_audio` packs the clips' audio too, with a dataset card under
    `licence`."""
    with export_reads():
        snapshot_check(project=project, fmt=fmt, text=text, splits=splits, licence=licence)
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
            with_audio=with_audio,
            licence=licence,
            created_by=created_by,
        )
        snapshot.full_clean()
        snapshot.save()
    return snapshot


def snapshot_start(
    *,
    project: Project,
    fmt: str,
    text: str,
    splits: list[str],
    created_by: User | None = None,
    with_audio: bool = False,
    licence: str = Snapshot.Licence.CC_BY_4,
) -> Snapshot:
    """A new snapshot, built in the background by a snapshot_build job."""
    from core.services import job_enqueue

    with transaction.atomic():
        snapshot = snapshot_create(
            project=project,
            fmt=fmt,
            text=text,
            splits=splits,
            created_by=created_by,
            with_audio=with_audio,
            licence=licence,
        )
        snapshot.job = job_enqueue(
            kind="snapshot_build",
            params={"snapshot_id": snapshot.pk},
            project=project,
            created_by=created_by,
            label=snapshot_label(snapshot),
        )
        snapshot.save(update_fields=["job"])
    return snapshot


def snapshot_label(snapshot: Snapshot) -> str:
    audio = ", with audio" if snapshot.with_audio else ""
    return (
        f"Export {snapshot.project.slug} v{snapshot.version} "
        f"({snapshot.format}, {snapshot.text}{audio})"
    )


def _write_split(
    snapshot: Snapshot,
    split: str,
    out: Path,
    tally: stats.Tally,
    audio: dict[int, str] | None = None,
) -> dict[str, Any]:
    """Writes one split's file; returns its manifest entry. With `audio` (clip id -> its
    audio file in the archive) only the captions of those clips are written, and each
    JSON line names its clip's audio file."""
    text = snapshot.text
    name = formats.split_file_name(snapshot.format, split)
    handle = TextFile(out, name)
    captions = 0
    clips: set[int] = set()
    try:
        if snapshot.format == Snapshot.Format.AUDIOCAPS:
            writer = formats.csv_writer(handle, line_end=formats.AUDIOCAPS_LINE_END)
            writer.writerow(formats.AUDIOCAPS_HEADER)
            for row in split_rows(snapshot.project, split):
                if audio is not None and row.clip_id not in audio:
                    continue
                value = row.text(text)
                writer.writerow(
                    [row.audiocap_id, row.youtube_id, formats.seconds_text(row.start), value]
                )
                tally.add(split=split, clip_id=row.clip_id, text=value)
                captions += 1
                clips.add(row.clip_id)
        elif snapshot.format == Snapshot.Format.CLOTHO:
            width = clotho_width(snapshot.project, split) or 5
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
            captions = _write_jsonl(snapshot, split, handle, tally, clips, audio)
    finally:
        handle.close()
    return {**handle.entry(), "split": split, "captions": captions, "clips": len(clips)}


_JSON_LINE = json.JSONEncoder(ensure_ascii=False)


def _write_jsonl(
    snapshot: Snapshot,
    split: str,
    handle: TextFile,
    tally: stats.Tally,
    clips: set[int],
    audio: dict[int, str] | None,
) -> int:
    """One JSON object a caption, for training: the clip, its audio path in storage (empty
    until fetched) and, in an audio snapshot, in the archive (`audio_file`), its AudioSet
    label mids, and the caption's raw and processed text."""
    captions = 0
    for row in split_rows(snapshot.project, split, labels=True):
        if audio is not None and row.clip_id not in audio:
            continue
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
        if audio is not None:
            record["audio_file"] = audio[row.clip_id]
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
    return {
        "recipes": recipes,
        "imports": imports,
        "batches": _batches(snapshot),
        "pipeline_versions": sorted(versions),
    }


def _requirements_text(batch: Batch) -> str:
    """What a worker needed to take the batch's HITs, in words."""
    found: BatchRequirements | None = getattr(batch, "requirements", None)
    if found is None:
        return "none"
    parts = []
    if found.min_approval_percent:
        parts.append(f"at least {found.min_approval_percent} % of reviewed work approved")
    if found.min_approved:
        parts.append(f"at least {found.min_approved:,} approved HITs")
    tests = sorted(q.name for q in found.qualifications.all())
    if tests:
        parts.append("passed " + ", ".join(tests))
    if parts:
        where = "every project" if found.site_wide_record else "this project"
        parts.append(f"records counted in {where}")
    return "; ".join(parts) or "none"


def _batches(snapshot: Snapshot) -> list[dict[str, Any]]:
    """The crowd batches of the snapshot's splits: how captions were asked for."""
    batches = (
        Batch.objects.filter(project=snapshot.project, split__in=snapshot.splits)
        .select_related("requirements")
        .order_by("pk")
    )
    return [
        {
            "name": b.name,
            "split": b.split,
            "captions_per_clip": b.captions_per_clip,
            "clips_per_hit": b.clips_per_hit,
            "reward_cents": b.reward_cents,
            "min_words": b.min_words,
            "max_words": b.max_words,
            "requirements": _requirements_text(b),
        }
        for b in batches
    ]


def _earmark_version() -> str:
    try:
        return metadata.version("earmark")
    except metadata.PackageNotFoundError:
        return "unknown"


def snapshot_build(
    *, snapshot: Snapshot, out_dir: Path | None = None, progress: ProgressFn = no_progress
) -> Snapshot:
    """Writes the snapshot's files (streamed from the database, one chunk of captions at a
    time; an audio snapshot's audio one clip at a time), its manifest and statistics as a
    zip streamed into storage, and marks it ready. With `out_dir` the files are also left
    there, unzipped. A failure marks the snapshot failed with the reason; a ready snapshot
    is never rebuilt."""
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
                licence=snapshot.licence,
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


def work_prefix(snapshot_id: int) -> str:
    """The temp folder of a build names its snapshot, so the sweep knows whose it is."""
    return f"earmark-snapshot-{snapshot_id}-pid{os.getpid()}-"


def local_path(storage: Storage, name: str) -> Path | None:
    """Where `name` lies on this machine's disk, or None for remote storage (S3)."""
    try:
        return Path(storage.path(name))
    except NotImplementedError:
        return None


def _storage_move(storage: Storage, source: str, wanted: str) -> str:
    """Moves the stored file `source` to a free name like `wanted`; returns that name.
    On disk it is a rename (atomic, no copy); in S3 a server-side copy (multipart beyond
    5 GB; nothing goes through this machine) and a delete."""
    final = storage.get_available_name(wanted)
    source_path, final_path = local_path(storage, source), local_path(storage, final)
    if source_path is not None and final_path is not None:
        final_path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source_path, final_path)
        return final
    from storages.backends.s3 import S3Storage
    from storages.utils import clean_name

    if isinstance(storage, S3Storage):
        # django-storages has no copy of its own; _normalize_name is how it maps a name to
        # its key (the S3_PREFIX location)
        key = storage._normalize_name(clean_name(final))
        storage.bucket.Object(key).copy(
            {"Bucket": storage.bucket.name, "Key": storage._normalize_name(clean_name(source))},
            ExtraArgs=storage._get_write_parameters(key),
            Config=storage.transfer_config,
        )
    else:
        with storage.open(source, "rb") as handle:
            final = storage.save(final, File(handle))
    storage.delete(source)
    return final


def _snapshot_write(snapshot: Snapshot, out_dir: Path | None, progress: ProgressFn) -> Snapshot:
    work = Path(tempfile.mkdtemp(prefix=work_prefix(snapshot.pk)))
    out = Path(out_dir) if out_dir else work / "files"
    out.mkdir(parents=True, exist_ok=True)
    storage = Snapshot.archive.field.storage
    partial = f"{PARTIAL_DIR}/{snapshot.pk}-{secrets.token_hex(8)}.zip"
    on_disk = local_path(storage, partial)
    target = on_disk or work / "archive.zip"  # remote storage: uploaded once written
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with target.open("xb") as handle, ArchiveWriter(handle) as archive:
            written = _write_members(snapshot, archive, out, out_dir is not None, progress)
            archive_sha = archive.close()
        steps = written.pop("steps")
        if on_disk is None:
            progress(steps - 1, steps, "storing the archive")
            with target.open("rb") as written_archive:
                partial = storage.save(partial, File(written_archive))
        built = _snapshot_commit(snapshot, partial=partial, archive_sha=archive_sha, **written)
        progress(steps, steps, f"{built.total_captions:,} captions")
        return built
    finally:
        _delete_quietly(storage, partial)  # gone already once committed (moved)
        shutil.rmtree(work, ignore_errors=True)


def _delete_quietly(storage: Storage, name: str) -> None:
    """Cleaning up after a build must not hide why it failed: what cannot be deleted now
    (storage unreachable) is left for the snapshots sweep."""
    try:
        storage.delete(name)
    except Exception:
        log.exception("could not delete %s; the snapshots sweep will", name)


def _write_members(
    snapshot: Snapshot, archive: ArchiveWriter, out: Path, copy_audio: bool, progress: ProgressFn
) -> dict[str, Any]:
    """Writes every file of the snapshot into `archive` (and `out`); returns what the
    commit stores (manifest, counts and statistics) and the progress steps."""
    tally = stats.Tally()
    if snapshot.with_audio:
        files, extra, counts, audio = _write_with_audio(
            snapshot, archive, out, tally, copy_audio, progress
        )
        steps = int(audio.pop("steps"))
    else:
        files, extra, audio = [], [], None
        steps = len(snapshot.splits) + 2
        for i, split in enumerate(snapshot.splits):
            progress(i, steps, f"writing {split}")
            with export_reads():
                files.append(_write_split(snapshot, split, out, tally))
        progress(len(snapshot.splits), steps, "manifest and statistics")
        counts = {f["split"]: {"clips": f["clips"], "captions": f["captions"]} for f in files}
        for entry in files:
            archive.add_file(entry["path"], out / entry["path"])
    statistics = statistics_data(
        tally, project=snapshot.project, splits=snapshot.splits, text=snapshot.text
    )
    context = _manifest_context(snapshot)
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
        **context,
        "statistics": {k: statistics[k] for k in ("word_rule", "splits", "all")},
    }
    if audio is not None:
        card = _card(snapshot, manifest, audio["splits"])
        (out / CARD).write_text(card, encoding="utf-8")
        extra.append(_add_text(archive, out, CARD))
        manifest["audio"] = {k: v for k, v in audio.items() if k != "splits"}
        manifest["licence"] = snapshot.licence
        manifest["extra_files"] = extra
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    archive.add_file("manifest.json", out / "manifest.json")
    if audio is not None:  # last: the checksum of every other file, manifest.json included
        (out / SHA256SUMS).write_bytes(archive.sha256sums())
        archive.add_file(SHA256SUMS, out / SHA256SUMS)
    return {"manifest": manifest, "counts": counts, "statistics": statistics, "steps": steps}


def _add_text(archive: ArchiveWriter, out: Path, path: str) -> dict[str, Any]:
    member = archive.add_file(path, out / path)
    return {"path": member.path, "bytes": member.bytes, "sha256": member.sha256}


def _write_with_audio(
    snapshot: Snapshot,
    archive: ArchiveWriter,
    out: Path,
    tally: stats.Tally,
    copy_audio: bool,
    progress: ProgressFn,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The audio layout (see corpus.services.snapshot_audio), split by split: each clip's
    audio straight into the archive, then the caption files of the clips that have it."""
    with export_reads():
        total = sum(
            queries.approved_captions(snapshot.project, split)
            .order_by()
            .values("clip_id")
            .distinct()
            .count()
            for split in snapshot.splits
        )
    done = 0

    def clip_done() -> None:
        nonlocal done
        done += 1
        progress(done, total + 2, "audio")

    progress(0, total + 2, "audio")
    names = label_names()
    missing = MissingAudio(out)
    files: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    counts: dict[str, dict[str, int]] = {}
    facts: list[datacard.SplitFacts] = []
    try:
        for split in snapshot.splits:
            written = write_split(
                snapshot=snapshot,
                split=split,
                archive=archive,
                out=out,
                tally=tally,
                names=names,
                missing=missing,
                copy_audio=copy_audio,
                clip_done=clip_done,
            )
            if written.captions_file is not None:  # Clotho: written with the audio
                files.append(written.captions_file)
            else:  # the captions of the clips whose audio is in the archive
                with export_reads():
                    files.append(_write_split(snapshot, split, out, tally, written.paths))
            for text_file in written.text_files:
                extra.append(_add_text(archive, out, text_file.path))
            facts.append(written.facts)
            counts[split] = {
                "clips": written.facts.clips,
                "captions": written.facts.captions,
                "missing_audio": written.facts.missing_audio,
            }
    finally:
        missing.file.close()
    for entry in files:
        archive.add_file(entry["path"], out / entry["path"])
    extra.append(_add_text(archive, out, MISSING_AUDIO_FILE))
    progress(total, total + 2, "card, manifest and checksums")
    audio_members = [m for m in archive.members if m.path.endswith(".wav")]
    audio = {
        "layout": layout_of(snapshot),
        "folders": {f.name: f.folder for f in facts if f.clips},
        "files": len(audio_members),
        "bytes": sum(m.bytes for m in audio_members),
        "missing": missing.count,
        "splits": facts,
        "steps": total + 2,
    }
    return files, extra, counts, audio


def _card(snapshot: Snapshot, manifest: dict[str, Any], splits: list[datacard.SplitFacts]) -> str:
    project = snapshot.project
    facts = datacard.CardFacts(
        pretty_name=f"{project.name} v{snapshot.version}",
        project=project.slug,
        version=snapshot.version,
        licence=snapshot.licence,
        layout=layout_of(snapshot),
        text=snapshot.text,
        created_at=snapshot.created_at.strftime("%Y-%m-%d"),
        earmark_version=manifest["earmark_version"],
        splits=splits,
        statistics=manifest["statistics"],
        recipes=manifest["recipes"],
        batches=manifest["batches"],
        imports=manifest["imports"],
        pipeline_versions=manifest["pipeline_versions"],
    )
    return datacard.card(facts)


def _snapshot_commit(
    snapshot: Snapshot,
    *,
    partial: str,
    archive_sha: str,
    manifest: dict[str, Any],
    counts: dict[str, Any],
    statistics: dict[str, Any],
) -> Snapshot:
    """Moves the written archive from its temporary key to its own name and marks the
    snapshot ready, in one transaction: if anything fails before the commit, the moved
    archive is deleted again."""
    storage = Snapshot.archive.field.storage
    stem = f"{snapshot.project.slug}-v{snapshot.version}-{snapshot.format}-{snapshot.text}"
    if snapshot.with_audio:
        stem += "-audio"
    stored = ""
    try:
        with transaction.atomic():
            locked = Snapshot.objects.select_for_update().get(pk=snapshot.pk)
            if locked.state != Snapshot.State.BUILDING:
                raise ValidationError(f"Snapshot v{locked.version} is {locked.state} already.")
            wanted = locked.archive.field.generate_filename(locked, f"{stem}.zip")
            stored = _storage_move(storage, partial, wanted)
            locked.archive.name = stored
            locked.archive_sha256 = archive_sha
            locked.manifest = manifest
            locked.counts = counts
            locked.state = Snapshot.State.READY
            locked.finished_at = timezone.now()
            locked.save()
            CorpusStatistics.objects.create(
                project=locked.project, snapshot=locked, data=statistics, job=locked.job
            )
    except BaseException:
        if stored:  # no row points at it: keep storage free of orphans
            _delete_quietly(storage, stored)
        raise
    return locked


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
    result: dict[str, Any] = {
        "snapshot": built.version,
        "format": built.format,
        "text": built.text,
        "captions": built.total_captions,
        "archive_sha256": built.archive_sha256,
    }
    if built.with_audio:
        result["audio_files"] = built.manifest["audio"]["files"]
        result["missing_audio"] = built.missing_audio
    return result


def snapshot_file_names(*, snapshot: Snapshot) -> list[str]:
    """The files of a ready snapshot served one by one: the caption files, the manifest
    and, in an audio snapshot, the card, metadata, missing_audio.csv and SHA256SUMS (the
    audio comes with the whole archive)."""
    names = [str(f["path"]) for f in snapshot.files]
    names += [str(f["path"]) for f in snapshot.manifest.get("extra_files", [])]
    names.append("manifest.json")
    if snapshot.with_audio:
        names.append(SHA256SUMS)
    return names


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
