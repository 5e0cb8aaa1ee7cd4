"""Curation workflows: ontology import, local audio import."""

from __future__ import annotations

import csv
import io
import json
import logging
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.utils import timezone
from django.utils.text import slugify

from curation import fetch, media
from curation.models import (
    Clip,
    Label,
    LabelSourceCount,
    Recipe,
    Subset,
    SubsetClip,
    SuperCategory,
    WordLabel,
)
from curation.recipes import (
    FLAGS,
    Candidates,
    RecipeError,
    RecipeSpec,
    Selection,
    recipe_from_text,
    select_subset,
    skew,
    spec_to_text,
)
from curation.segments import SegmentFormatError, count_lines, read_segments

ProgressFn = Callable[..., None]


def _no_progress(*_: Any, **__: Any) -> None:
    pass


# Ontology ------------------------------------------------------------------------------

_LABEL_FIELDS = (
    "name",
    "description",
    "citation_uri",
    "positive_examples",
    "abstract",
    "blacklisted",
)


def _parse_ontology(path: Path) -> list[dict[str, Any]]:
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValidationError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(f"{path.name}: not valid JSON ({exc})") from None
    if not isinstance(entries, list):
        raise ValidationError(f"{path.name}: expected a JSON list of ontology classes")
    rows = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"{path.name}: entry {index}"
        if not isinstance(entry, dict):
            raise ValidationError(f"{where}: expected an object, got {type(entry).__name__}")
        mid, name = entry.get("id"), entry.get("name")
        if not isinstance(mid, str) or not mid.strip():
            raise ValidationError(f"{where}: missing 'id'")
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"{where} (id {mid}): missing 'name'")
        if mid in seen:
            raise ValidationError(f"{where}: id {mid} appears twice")
        seen.add(mid)
        restrictions = entry.get("restrictions") or []
        children = entry.get("child_ids") or []
        if not isinstance(children, list) or not isinstance(restrictions, list):
            raise ValidationError(f"{where} (id {mid}): child_ids and restrictions must be lists")
        rows.append(
            {
                "mid": mid,
                "name": name.strip(),
                "description": entry.get("description") or "",
                "citation_uri": entry.get("citation_uri") or "",
                "positive_examples": entry.get("positive_examples") or [],
                "abstract": "abstract" in restrictions,
                "blacklisted": "blacklist" in restrictions,
                "child_ids": children,
            }
        )
    for row in rows:
        unknown = [c for c in row["child_ids"] if c not in seen]
        if unknown:
            raise ValidationError(
                f"{path.name}: {row['mid']} ({row['name']}) lists unknown child ids {unknown}"
            )
    return rows


def ontology_import(*, path: Path, progress: ProgressFn = _no_progress) -> dict[str, int]:
    """Loads AudioSet's ontology.json. Idempotent: re-running updates changed classes
    and the tree, and reports what changed. Nothing is written if the file is invalid."""
    rows = _parse_ontology(Path(path))
    total = len(rows)
    created = updated = unchanged = 0
    with transaction.atomic():
        existing = {label.mid: label for label in Label.objects.all()}
        for done, row in enumerate(rows, start=1):
            label = existing.get(row["mid"])
            values = {f: row[f] for f in _LABEL_FIELDS}
            if label is None:
                existing[row["mid"]] = Label.objects.create(mid=row["mid"], **values)
                created += 1
            elif any(getattr(label, f) != v for f, v in values.items()):
                for field, value in values.items():
                    setattr(label, field, value)
                label.save(update_fields=list(_LABEL_FIELDS))
                updated += 1
            else:
                unchanged += 1
            if done % 50 == 0:
                progress(done, total + 1, "classes")
        Edge = Label.children.through
        Edge.objects.filter(from_label__in=[existing[r["mid"]] for r in rows]).delete()
        Edge.objects.bulk_create(
            [
                Edge(from_label_id=existing[r["mid"]].pk, to_label_id=existing[c].pk)
                for r in rows
                for c in r["child_ids"]
            ]
        )
    progress(total + 1, total + 1, "tree linked")
    return {"classes": total, "created": created, "updated": updated, "unchanged": unchanged}


def ontology_import_job(*, job: Any, progress: ProgressFn, path: str) -> dict[str, int]:
    return ontology_import(path=Path(path), progress=progress)


# Label curation -------------------------------------------------------------------------


def label_curate(
    *, label: Label, needs_visuals: bool, needs_expertise: bool, excluded: bool, note: str = ""
) -> Label:
    """Records a researcher's judgement of a label; recipes exclude labels by these flags."""
    label.needs_visuals, label.needs_expertise, label.excluded = (
        needs_visuals,
        needs_expertise,
        excluded,
    )
    label.curation_note = note.strip()
    label.save(update_fields=["needs_visuals", "needs_expertise", "excluded", "curation_note"])
    return label


# Clip counts per label (the ontology page's cache) --------------------------------------


def label_counts_refresh(*, label_ids: Iterable[int] | None = None) -> int:
    """Recounts the cached clips per label and AudioSet list (LabelSourceCount) from the
    clip-label links: every label, or only `label_ids`. Two set-based statements (delete,
    then INSERT … SELECT … GROUP BY) run in the caller's transaction, so an import that fails
    rolls its counts back with its clips. Idempotent; returns the count rows written."""
    counts = LabelSourceCount._meta.db_table
    links = Clip.labels.through._meta.db_table
    clips = Clip._meta.db_table
    where, params = "", []
    if label_ids is not None:
        # at most the ontology's few hundred labels, well within SQLite's variable limit
        ids = sorted(set(label_ids))
        if not ids:
            return 0
        where = f"WHERE label_id IN ({', '.join(['%s'] * len(ids))})"
        params = ids
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Two imports committing side by side would each delete only the rows they can
            # see and then collide on the unique constraint; waiting here for the other to
            # commit also lets this one count the other's links. Readers are not blocked.
            cursor.execute(f"LOCK TABLE {counts} IN EXCLUSIVE MODE")
        cursor.execute(f"DELETE FROM {counts} {where}", params)
        cursor.execute(
            f"INSERT INTO {counts} (label_id, segment_list, clips) "
            f"SELECT label_id, {clips}.segment_list, COUNT(*) FROM {links} "
            f"JOIN {clips} ON {clips}.id = {links}.clip_id {where} "
            f"GROUP BY label_id, {clips}.segment_list",
            params,
        )
        return cursor.rowcount


def label_counts_adjust(*, changes: Iterable[tuple[int, str, int]]) -> None:
    """Adds each (label id, segment list, delta) to the cached counts, never going below
    zero. The cheap path for edits of a few links (one clip's labels, a deleted clip), where
    recounting a label that a million clips carry would cost far more than the edit."""
    rows = [(label_id, segment_list, delta) for label_id, segment_list, delta in changes if delta]
    if not rows:
        return
    table = LabelSourceCount._meta.db_table
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (label_id, segment_list, clips) VALUES (%s, %s, %s) "
            "ON CONFLICT (label_id, segment_list) DO UPDATE SET clips = "
            f"CASE WHEN {table}.clips + %s < 0 THEN 0 ELSE {table}.clips + %s END",
            [(label_id, lst, max(delta, 0), delta, delta) for label_id, lst, delta in rows],
        )


def word_labels_import(*, path: Path) -> dict[str, int]:
    """Loads a CSV `word,super_category,labels` (labels: AudioSet names or ids joined by `;`)
    that maps AudioSet labels to hint words, AudioCaps-style. All or nothing: a bad row is
    reported with its line and nothing changes."""
    path = Path(path)
    by_key = {mid: pk for pk, mid in Label.objects.values_list("pk", "mid")}
    by_key.update({name.lower(): pk for pk, name in Label.objects.values_list("pk", "name")})
    rows: list[tuple[str, str, list[int]]] = []
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = {"word", "super_category", "labels"} - set(reader.fieldnames or [])
            if missing:
                raise ValidationError(
                    f"{path.name}: missing column(s) {', '.join(sorted(missing))}"
                )
            for row in reader:
                where = f"{path.name}, line {reader.line_num}"
                word = (row["word"] or "").strip().lower()
                category = (row["super_category"] or "").strip().lower()
                if not word:
                    raise ValidationError(f"{where}: empty word")
                if category not in SuperCategory.values:
                    raise ValidationError(
                        f"{where}: super_category {category!r} is not one of "
                        f"{', '.join(SuperCategory.values)}"
                    )
                keys = [k.strip() for k in (row["labels"] or "").split(";") if k.strip()]
                unknown = [k for k in keys if k not in by_key and k.lower() not in by_key]
                if not keys or unknown:
                    raise ValidationError(f"{where}: unknown AudioSet label(s) {unknown or keys}")
                rows.append((word, category, [by_key.get(k, by_key.get(k.lower())) for k in keys]))
    except FileNotFoundError:
        raise ValidationError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise ValidationError(f"{path.name}: not UTF-8 text") from None
    with transaction.atomic():
        for word, category, label_pks in rows:
            word_label, _ = WordLabel.objects.update_or_create(
                name=word, defaults={"super_category": category}
            )
            Label.objects.filter(pk__in=label_pks).update(word_label=word_label)
    return {"words": len(rows), "labels": sum(len(pks) for _, _, pks in rows)}


# Local audio -----------------------------------------------------------------------------

MAX_LOCAL_SECONDS = 60.0


def _prepare_local(src: Path, workdir: Path, sample_rate: int) -> dict[str, Any]:
    if not src.is_file():
        raise media.MediaError(f"{src}: no such file")
    info = media.probe(src)
    if info.duration_seconds > MAX_LOCAL_SECONDS:
        raise media.MediaError(
            f"{src.name}: {info.duration_seconds:.1f} s long; clips may last at most "
            f"{MAX_LOCAL_SECONDS:.0f} s"
        )
    wav = workdir / f"{src.stem}.wav"
    media.decode_audio(src, wav, sample_rate=sample_rate)
    return {
        "src": src,
        "sample_rate": sample_rate,
        "wav": wav,
        "sha256": media.sha256_of(wav),
        "peaks": media.waveform_peaks(wav),
        "duration": info.duration_seconds,
    }


def clips_import_local(
    *,
    paths: list[Path],
    labels: dict[str, list[str]] | None = None,
    videos: dict[str, Path] | None = None,
    skip_broken: bool = False,
    progress: ProgressFn = _no_progress,
    sample_rate: int = media.AUDIO_SAMPLE_RATE,
) -> dict[str, Any]:
    """Imports local audio files as clips: decoded to mono WAV at `sample_rate` (the
    project's rate), hashed, peaks computed.

    `labels` maps a file name to AudioSet ids; `videos` maps a file name to a video hint.
    Broken files stop the import, naming each one, before anything is stored — unless
    `skip_broken`, which imports the rest and lists the broken ones in the result.
    Re-importing the same audio is a no-op.
    """
    labels = labels or {}
    videos = videos or {}
    wanted_mids = {mid for mids in labels.values() for mid in mids}
    known = {label.mid: label for label in Label.objects.filter(mid__in=wanted_mids)}
    missing = sorted(wanted_mids - set(known))
    if missing:
        raise ValidationError(f"Unknown AudioSet label ids {missing}; import the ontology first.")

    total = len(paths) * 2
    prepared, broken = [], []
    with tempfile.TemporaryDirectory(prefix="earmark-import-") as tmp:
        for done, path in enumerate(paths, start=1):
            try:
                prepared.append(_prepare_local(Path(path), Path(tmp), sample_rate))
            except media.MediaError as exc:
                broken.append(str(exc))
            progress(done, total, f"checked {Path(path).name}")
        if broken and not skip_broken:
            raise ValidationError(
                f"{len(broken)} of {len(paths)} file(s) cannot be imported, nothing was: "
                + "; ".join(broken)
            )
        created = skipped = 0
        clip_ids: list[int] = []
        for done, item in enumerate(prepared, start=len(paths) + 1):
            name = item["src"].name
            present = Clip.objects.filter(
                source=Clip.Source.LOCAL, content_sha256=item["sha256"]
            ).first()
            if present is not None:
                skipped += 1
                clip_ids.append(present.pk)
                continue
            clip = _store_local_clip(
                item, [known[m] for m in labels.get(name, [])], videos.get(name)
            )
            clip_ids.append(clip.pk)
            created += 1
            progress(done, total, f"stored {name}")
    progress(total, total, "done")
    return {
        "files": len(paths),
        "created": created,
        "already_present": skipped,
        "broken": broken,
        "clip_ids": clip_ids,
    }


def _store_local_clip(item: dict[str, Any], labels: list[Label], video: Path | None) -> Clip:
    clip = Clip(
        source=Clip.Source.LOCAL,
        original_name=item["src"].name,
        start_seconds=0,
        end_seconds=round(item["duration"], 3),
        duration_seconds=item["duration"],
        sample_rate=item["sample_rate"],
        content_sha256=item["sha256"],
        peaks=item["peaks"],
        status=Clip.Status.READY,
    )
    stored: list[Any] = []
    try:
        with transaction.atomic():
            with item["wav"].open("rb") as handle:
                clip.audio.save(f"{item['sha256'][:16]}.wav", File(handle), save=False)
                stored.append(clip.audio)
            if video is not None:
                with Path(video).open("rb") as handle:
                    clip.video.save(
                        f"{item['sha256'][:16]}{Path(video).suffix}", File(handle), save=False
                    )
                    stored.append(clip.video)
            clip.save()
            clip.labels.set(labels)
    except Exception:
        for field_file in stored:  # keep MEDIA_ROOT free of files no row points at
            field_file.storage.delete(field_file.name)
        raise
    return clip


def clips_import_local_job(
    *,
    job: Any,
    progress: ProgressFn,
    paths: list[str],
    labels: dict[str, list[str]] | None = None,
    videos: dict[str, str] | None = None,
    skip_broken: bool = False,
    sample_rate: int = media.AUDIO_SAMPLE_RATE,
) -> dict[str, Any]:
    return clips_import_local(
        paths=[Path(p) for p in paths],
        labels=labels,
        videos={k: Path(v) for k, v in (videos or {}).items()},
        skip_broken=skip_broken,
        progress=progress,
        sample_rate=sample_rate,
    )


# Fetching ---------------------------------------------------------------------------------

# A claim older than this belongs to a run that died (worker killed, machine lost): one
# fetch is bounded by yt-dlp's and ffmpeg's timeouts to a few minutes.
ARCHIVE_UPLOAD_DIR = "uploads/archives"


def archive_upload_store(*, upload: Any) -> str:
    """Puts an uploaded archive where a media worker can read it (the storage, so this
    holds for S3 as well as a shared disk); returns its storage name. The type is checked
    here, on its first bytes, so a wrong file is refused before a job is queued."""
    from curation import archives

    head = upload.read(512)
    upload.seek(0)
    try:
        archives.archive_kind(upload.name, head)
    except archives.ArchiveError as exc:
        raise ValidationError(str(exc)) from None
    suffix = next(s for s in archives.ARCHIVE_SUFFIXES if upload.name.lower().endswith(s))
    return default_storage.save(f"{ARCHIVE_UPLOAD_DIR}/{uuid.uuid4().hex}{suffix}", upload)


def clips_import_archive(
    *,
    project: Any,
    stored_name: str,
    upload_name: str,
    subset_name: str = "",
    progress: ProgressFn = _no_progress,
) -> dict[str, Any]:
    """Imports the audio files of an uploaded archive as clips at the project's sample
    rate; broken files are listed and the rest imported; with `subset_name`, the clips
    (new and already known) become a hand-picked subset of the project. The stored
    archive is deleted afterwards, whatever happens."""
    from curation import archives

    try:
        if (
            subset_name
            and Subset.objects.filter(project=project, slug=slugify(subset_name)[:80]).exists()
        ):
            raise ValidationError(f"The project already has a subset called {subset_name!r}.")
        with tempfile.TemporaryDirectory(prefix="earmark-archive-") as tmp:
            local = Path(tmp) / ("upload" + Path(stored_name).suffix)
            with default_storage.open(stored_name, "rb") as src, local.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            progress(0, 1, f"unpacking {upload_name}")
            try:
                unpacked = archives.unpack(local, name=upload_name, into=Path(tmp) / "files")
            except archives.ArchiveError as exc:
                raise ValidationError(str(exc)) from None
            result = clips_import_local(
                paths=unpacked.audio,
                skip_broken=True,
                progress=progress,
                sample_rate=project.audio_sample_rate,
            )
        if not result["clip_ids"]:
            raise ValidationError(
                f"{upload_name}: none of its {result['files']} audio file(s) could be read: "
                + "; ".join(result["broken"])
            )
        result["skipped_members"] = unpacked.skipped
        if subset_name:
            subset = subset_from_clips(
                project=project, name=subset_name, clip_ids=result["clip_ids"]
            )
            result["subset"] = subset.slug
        return result
    finally:
        default_storage.delete(stored_name)


def clips_import_archive_job(
    *,
    job: Any,
    progress: ProgressFn,
    stored_name: str,
    upload_name: str,
    subset_name: str = "",
) -> dict[str, Any]:
    if job.project is None:
        raise ValidationError("An archive import belongs to a project.")
    return clips_import_archive(
        project=job.project,
        stored_name=stored_name,
        upload_name=upload_name,
        subset_name=subset_name,
        progress=progress,
    )


FETCH_STALE_AFTER = timedelta(minutes=15)
FETCH_POLL_SECONDS = 1.0

log = logging.getLogger(__name__)

# (clip id, its fetch_attempts when the run began) — see _clip_claim
FetchTicket = tuple[int, int]


def _clip_claim(*, clip_id: int, attempts: int | None, stale_after: timedelta) -> Clip | None:
    """Marks a due clip `fetching`, counting the attempt, and returns it; None when the clip
    is not due or another worker holds it.

    Due: pending; failed with attempts left; fetching for longer than `stale_after` (its
    run died). Counting at claim time means an interrupted attempt counts too, so a clip
    that kills its worker every time stops being retried. `attempts` is the clip's count
    when the caller's run began: a clip another worker of the same run has attempted
    since is left alone, so one run tries each clip once. `fetched_at` holds the claim
    time while fetching, and the time of the outcome afterwards.
    """
    now = timezone.now()
    with transaction.atomic():
        # skip_locked: two workers claiming the same clip must not queue on its row lock
        clip = Clip.objects.select_for_update(skip_locked=True).filter(pk=clip_id).first()
        if clip is None or clip.source != Clip.Source.YOUTUBE:
            return None
        if attempts is not None and clip.fetch_attempts != attempts:
            return None
        out_of_attempts = clip.fetch_attempts >= settings.FETCH_MAX_ATTEMPTS
        if clip.status == Clip.Status.FETCHING:
            if clip.fetched_at is not None and clip.fetched_at > now - stale_after:
                return None
            if out_of_attempts:
                clip.status = Clip.Status.FAILED
                clip.error = _fetch_failure_text(
                    "the fetch was interrupted (its worker stopped)", clip.fetch_attempts
                )
                clip.fetched_at = now
                clip.save(update_fields=["status", "error", "fetched_at"])
                return None
        elif clip.status == Clip.Status.FAILED:
            if out_of_attempts:
                return None
        elif clip.status != Clip.Status.PENDING:
            return None  # ready clips are never fetched twice; unavailable ones are gone
        clip.status = Clip.Status.FETCHING
        clip.fetch_attempts += 1
        clip.fetched_at = now
        clip.error = ""
        clip.save(update_fields=["status", "fetch_attempts", "fetched_at", "error"])
    return clip


def _fetch_failure_text(reason: str, attempts: int) -> str:
    left = settings.FETCH_MAX_ATTEMPTS - attempts
    tail = f"{left} attempt(s) left" if left > 0 else "no attempts left"
    return f"{reason} (attempt {attempts} of {settings.FETCH_MAX_ATTEMPTS}; {tail})"


def _fetch_is_ours(current: Clip, claimed: Clip) -> bool:
    """Whether our claim still stands: a claim taken over as stale must not be overwritten."""
    return (
        current.status == Clip.Status.FETCHING and current.fetch_attempts == claimed.fetch_attempts
    )


def _clip_settle(claimed: Clip, *, status: str, error: str) -> Clip:
    with transaction.atomic():
        clip = Clip.objects.select_for_update().get(pk=claimed.pk)
        if _fetch_is_ours(clip, claimed):
            clip.status = status
            clip.error = error
            clip.fetched_at = timezone.now()
            clip.save(update_fields=["status", "error", "fetched_at"])
    return clip


def _clip_store_fetched(claimed: Clip, fetched: fetch.FetchedClip) -> Clip:
    """Stores verified media through Django's storage and marks the clip ready, in one
    transaction; files stored before a failure are deleted, so no file lacks a row and
    no ready row lacks its files."""
    stem = f"{claimed.youtube_id}_{round(claimed.start_seconds * 1000)}"
    stored: list[Any] = []
    try:
        with transaction.atomic():
            clip = Clip.objects.select_for_update().get(pk=claimed.pk)
            if not _fetch_is_ours(clip, claimed):
                return clip  # reclaimed as stale meanwhile: the new holder's result counts
            replaced = [f.name for f in (clip.audio, clip.video, clip.video_features) if f]
            with fetched.audio.open("rb") as handle:
                clip.audio.save(f"{stem}.wav", File(handle), save=False)
                stored.append(clip.audio)
            if fetched.video is not None:
                with fetched.video.open("rb") as handle:
                    clip.video.save(f"{stem}.mp4", File(handle), save=False)
                    stored.append(clip.video)
            else:
                clip.video = ""
            if fetched.video_features is not None:
                with fetched.video_features.open("rb") as handle:
                    clip.video_features.save(f"{stem}.mp4", File(handle), save=False)
                    stored.append(clip.video_features)
            else:
                clip.video_features = ""
            clip.status = Clip.Status.READY
            clip.error = ""
            clip.fetched_at = timezone.now()
            clip.duration_seconds = fetched.duration_seconds
            clip.sample_rate = fetched.sample_rate
            clip.peaks = fetched.peaks
            clip.content_sha256 = fetched.sha256
            clip.silent = fetched.silent
            clip.save()
            kept = {clip.audio.name, clip.video.name, clip.video_features.name}
            orphans = [name for name in replaced if name not in kept]
            if orphans:
                storage = clip.audio.storage
                transaction.on_commit(lambda: [storage.delete(name) for name in orphans])
    except Exception:
        for field_file in stored:
            field_file.storage.delete(field_file.name)
        raise
    return clip


def clip_fetch(
    *,
    clip_id: int,
    attempts: int | None = None,
    stale_after: timedelta = FETCH_STALE_AFTER,
    sample_rate: int = media.AUDIO_SAMPLE_RATE,
    video_features_height: int | None = None,
) -> Clip:
    """Fetches one YouTube clip if it is due (see _clip_claim) and returns it as it ends up,
    its audio as mono WAV at `sample_rate`; with `video_features_height`, also a silent
    video that tall for video features (Clip.video_features).

    Outcomes: ready, with the WAV, the video hint, peaks and the silence flag; unavailable,
    with yt-dlp's reason in `error`; failed, with the reason and the attempts left. A clip
    that is not due, or that another worker holds, is returned unchanged.
    """
    claimed = _clip_claim(clip_id=clip_id, attempts=attempts, stale_after=stale_after)
    if claimed is None:
        return Clip.objects.get(pk=clip_id)
    try:
        with tempfile.TemporaryDirectory(prefix="earmark-fetch-") as tmp:
            fetched = fetch.fetch_section(
                youtube_id=claimed.youtube_id,
                start=float(claimed.start_seconds),
                end=float(claimed.end_seconds),
                workdir=Path(tmp),
                sample_rate=sample_rate,
                video_features_height=video_features_height,
            )
            return _clip_store_fetched(claimed, fetched)
    except fetch.Unavailable as exc:
        return _clip_settle(claimed, status=Clip.Status.UNAVAILABLE, error=exc.reason)
    except fetch.FetchFailed as exc:
        error = _fetch_failure_text(exc.reason, claimed.fetch_attempts)
        return _clip_settle(claimed, status=Clip.Status.FAILED, error=error)
    except Exception as exc:
        # a bug or a storage fault must not leave the clip "fetching" until it goes stale
        log.exception("fetching clip %s failed", clip_id)
        error = _fetch_failure_text(f"{type(exc).__name__}: {exc}", claimed.fetch_attempts)
        return _clip_settle(claimed, status=Clip.Status.FAILED, error=error)


def subset_video_features_height(subset: Subset) -> int | None:
    """The features video height the subset's recipe asks for: the recipe as it is now, so
    a researcher can turn it on without rebuilding (it selects nothing), or the spec the
    subset was built from when its recipe is gone. Like the sample rate, it applies to
    clips fetched from now on; a ready clip is never fetched again."""
    spec = subset.recipe.spec if subset.recipe is not None else subset.spec
    height = spec.get("video_features_height")
    return height if isinstance(height, int) and not isinstance(height, bool) else None


def _fetch_settled(clip: Clip, attempts: int) -> bool:
    """Whether the clip is done with for this run: gone or ready, or attempted since the
    run began (`attempts` then) and no longer in the hands of a worker."""
    if clip.status in (Clip.Status.READY, Clip.Status.UNAVAILABLE):
        return True
    return clip.fetch_attempts > attempts and clip.status != Clip.Status.FETCHING


def clips_fetch(
    *,
    subset: Subset | None = None,
    clip_ids: Iterable[int] | None = None,
    progress: ProgressFn = _no_progress,
    enlist: Callable[[list[FetchTicket]], None] | None = None,
    stale_after: timedelta = FETCH_STALE_AFTER,
    poll_seconds: float = FETCH_POLL_SECONDS,
    sample_rate: int | None = None,
    video_features_height: int | None = None,
    retry_exhausted: bool = False,
) -> dict[str, int]:
    """Fetches every YouTube clip of the subset (or of `clip_ids`, or both: their overlap)
    that is due, and waits until each is settled. Resumable: ready and unavailable clips
    are skipped, failed ones are retried while attempts are left, and clips stuck
    `fetching` by a run that died are taken over once stale.

    `enlist`, when given, receives the run's tickets to hand to other workers (the job
    sends one Celery task per clip); this process fetches too, so the run finishes
    even when nobody else helps. Progress counts settled clips, whoever fetched them.
    """
    if subset is None and clip_ids is None:
        raise ValidationError("Name a subset or clips to fetch.")
    if sample_rate is None:
        # clips are shared between projects; the subset's project decides, the first
        # time a clip is fetched (a ready clip is never fetched again)
        sample_rate = subset.project.audio_sample_rate if subset else media.AUDIO_SAMPLE_RATE
    if video_features_height is None and subset is not None:
        video_features_height = subset_video_features_height(subset)
    clips = Clip.objects.filter(source=Clip.Source.YOUTUBE)
    if subset is not None:
        clips = clips.filter(subsets=subset)
    if clip_ids is not None:
        wanted = set(clip_ids)
        known = set(Clip.objects.filter(pk__in=wanted).values_list("pk", flat=True))
        if wanted - known:
            raise ValidationError(f"Unknown clip id(s): {sorted(wanted - known)}.")
        clips = clips.filter(pk__in=wanted)
    if retry_exhausted:
        # a researcher's explicit second chance (the source is back, the block lifted):
        # failed clips out of attempts get a full set again
        clips.filter(
            status=Clip.Status.FAILED, fetch_attempts__gte=settings.FETCH_MAX_ATTEMPTS
        ).update(fetch_attempts=0)
    rows = list(clips.order_by("pk").values_list("pk", "status", "fetch_attempts"))
    already_ready = sum(1 for _, status, _ in rows if status == Clip.Status.READY)
    tickets: list[FetchTicket] = [
        (pk, attempts)
        for pk, status, attempts in rows
        if status in (Clip.Status.PENDING, Clip.Status.FETCHING)
        or (status == Clip.Status.FAILED and attempts < settings.FETCH_MAX_ATTEMPTS)
    ]
    total = len(tickets)
    progress(0, total, f"{total} of {len(rows)} clip(s) to fetch")
    if enlist is not None and tickets:
        enlist(tickets)

    settled = 0
    waiting: dict[int, int] = {}
    for pk, attempts in tickets:
        try:
            clip = clip_fetch(
                clip_id=pk,
                attempts=attempts,
                stale_after=stale_after,
                sample_rate=sample_rate,
                video_features_height=video_features_height,
            )
        except Clip.DoesNotExist:
            settled += 1  # deleted meanwhile: nothing left to fetch
            continue
        if _fetch_settled(clip, attempts):
            settled += 1
        else:
            waiting[pk] = attempts  # another worker holds it, or is claiming it right now
        progress(settled, total, f"{clip}: {clip.get_status_display().lower()}")

    while waiting:
        progress(settled, total, f"waiting for {len(waiting)} clip(s) other workers are fetching")
        time.sleep(poll_seconds)
        current = {clip.pk: clip for clip in Clip.objects.filter(pk__in=list(waiting))}
        for pk, attempts in list(waiting.items()):
            clip = current.get(pk)
            if clip is not None and not _fetch_settled(clip, attempts):
                # take over a claim that went stale (its worker died); else a no-op
                token = clip.fetch_attempts if clip.status == Clip.Status.FETCHING else attempts
                try:
                    clip = clip_fetch(
                        clip_id=pk,
                        attempts=token,
                        stale_after=stale_after,
                        sample_rate=sample_rate,
                        video_features_height=video_features_height,
                    )
                except Clip.DoesNotExist:
                    clip = None
            if clip is None or _fetch_settled(clip, attempts):
                settled += 1
                del waiting[pk]
    progress(total, total, "done")

    final = Counter(clips.values_list("status", flat=True))
    return {
        "clips": len(rows),
        "attempted": total,
        "already_ready": already_ready,
        "ready": final[Clip.Status.READY],
        "silent": clips.filter(status=Clip.Status.READY, silent=True).count(),
        "unavailable": final[Clip.Status.UNAVAILABLE],
        "failed": final[Clip.Status.FAILED],
        "failed_no_attempts_left": clips.filter(
            status=Clip.Status.FAILED, fetch_attempts__gte=settings.FETCH_MAX_ATTEMPTS
        ).count(),
    }


def clips_fetch_job(
    *,
    job: Any,
    progress: ProgressFn,
    subset_id: int | None = None,
    clip_ids: list[int] | None = None,
    fan_out: bool = True,
    retry_exhausted: bool = False,
) -> dict[str, int]:
    """The "clips_fetch" job (media queue).

    Design: the job fetches clip after clip itself and, with `fan_out`, also sends one
    `curation.tasks.fetch_clip` task per clip to the media queue, so every free media
    worker process joins in. Concurrency is therefore the number of media worker
    processes (`celery -A earmark worker -Q media -c N`), with no second setting to keep
    in step. Claims go through the database (skip_locked), so each clip is fetched by
    exactly one process, and the job, which waits for clips others hold, reports
    progress over all of them — a true progress bar. With a single worker process the
    job does all the work and the queued tasks find nothing left; tasks that arrive
    after the job finished or was cancelled do nothing.
    """
    subset = None
    if subset_id is not None:
        subset = Subset.objects.filter(pk=subset_id).first()
        if subset is None:
            raise ValidationError(f"Subset #{subset_id} no longer exists.")

    sample_rate = subset.project.audio_sample_rate if subset else media.AUDIO_SAMPLE_RATE
    height = subset_video_features_height(subset) if subset else None

    def enlist(tickets: list[FetchTicket]) -> None:
        from curation.tasks import fetch_clip

        options = {"sample_rate": sample_rate, "video_features_height": height}
        for clip_id, attempts in tickets:
            fetch_clip.apply_async(args=[clip_id, attempts, job.pk], kwargs=options, queue="media")

    return clips_fetch(
        subset=subset,
        clip_ids=clip_ids,
        progress=progress,
        enlist=enlist if fan_out else None,
        sample_rate=sample_rate,
        video_features_height=height,
        retry_exhausted=retry_exhausted,
    )


# AudioSet segment lists -------------------------------------------------------------------

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
    progress: ProgressFn = _no_progress,
    batch_size: int = SEGMENT_BATCH,
) -> dict[str, int]:
    """Streams an AudioSet segment CSV into clips and their labels.

    One transaction per file: a malformed row (or an unknown label) stops the import with
    the file, line and reason, and nothing from that file is kept. Clips are de-duplicated
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
    new_ids = _allocate_clip_ids(len(new_keys))
    _insert_youtube_clips(
        [
            (clip_id, youtube_id, _seconds(start), _seconds(batch[(youtube_id, start)][0]))
            for clip_id, (youtube_id, start) in zip(new_ids, new_keys, strict=True)
        ],
        segment_list,
    )
    pks = {**existing, **dict(zip(new_keys, new_ids, strict=True))}
    fresh, known = [], []  # links of new clips, and of clips imported before
    for key, (_, labels) in batch.items():
        (known if key in existing else fresh).extend((pks[key], label) for label in labels)
    link_table = Clip.labels.through._meta.db_table
    _insert_many(link_table, ["clip_id", "label_id"], fresh)
    # a segment imported before keeps its links and gains the new ones
    _insert_many(link_table, ["clip_id", "label_id"], known, suffix=" ON CONFLICT DO NOTHING")
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


def _insert_many(table: str, columns: list[str], rows: list[Any], *, suffix: str = "") -> None:
    """Bulk INSERT. executemany costs a round trip per row (75k for 22k segments on
    psycopg), so PostgreSQL gets COPY and SQLite multi-row statements. `suffix` (ON
    CONFLICT …) needs INSERT, so rows that may conflict go through the slower path."""
    if not rows:
        return
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and not suffix:
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        row_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
        per_statement = max(1, 16_000 // len(columns))  # SQLite allows 32,766 variables
        for start in range(0, len(rows), per_statement):
            chunk = rows[start : start + per_statement]
            cursor.execute(
                f"INSERT INTO {table} ({names}) VALUES {', '.join([row_sql] * len(chunk))}{suffix}",
                [value for row in chunk for value in row],
            )


def _allocate_clip_ids(count: int) -> list[int]:
    """Ids for clips about to be inserted, so a batch needs no second lookup to learn them.
    PostgreSQL hands them out from the id sequence; SQLite's write lock, held by the import's
    transaction (IMMEDIATE mode), makes max(id) + 1 onwards safe."""
    if count == 0:
        return []
    table = Clip._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [table, count],
            )
            return [row[0] for row in cursor.fetchall()]
        cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
        first = cursor.fetchone()[0] + 1
        return list(range(first, first + count))


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
    _insert_many(Clip._meta.db_table, [f.column for f in fields], values)


def segments_import_job(
    *, job: Any, progress: ProgressFn, path: str, segment_list: str
) -> dict[str, int]:
    return segments_import(path=Path(path), segment_list=segment_list, progress=progress)


# Recipes and subsets --------------------------------------------------------------------


# Page and API addresses live beside recipe slugs (/recipes/import/, /recipes/preview).
RESERVED_RECIPE_SLUGS = frozenset({"new", "import", "preview"})
RECIPE_FILE_MAX_BYTES = 64 * 1024  # a recipe is a few hundred bytes; anything big is a mistake


def recipe_save(
    *,
    project: Any,
    name: str,
    spec: RecipeSpec | dict[str, Any],
    created_by: Any = None,
    slug: str = "",
) -> Recipe:
    """Creates the project's recipe with this slug, or replaces its spec."""
    try:
        spec = spec if isinstance(spec, RecipeSpec) else RecipeSpec.from_dict(spec)
        spec.validate()
    except (RecipeError, TypeError) as exc:
        raise ValidationError(f"Recipe {name!r}: {exc}") from None
    slug = slug or slugify(name)[:80]
    if not slug:
        raise ValidationError(f"Recipe {name!r}: the name needs at least one letter or digit.")
    if slug in RESERVED_RECIPE_SLUGS:
        raise ValidationError(
            f"Recipe {name!r}: {slug!r} is a reserved address; pick another name."
        )
    recipe, _ = Recipe.objects.update_or_create(
        project=project,
        slug=slug,
        defaults={"name": name, "spec": spec.to_dict(), "created_by": created_by},
    )
    return recipe


def recipe_import(*, project: Any, path: Path, created_by: Any = None) -> Recipe:
    """Reads a recipe from a .toml or .json file; its `name` field (or the file name) names it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"{path}: cannot read ({exc.strerror})") from None
    spec, name = recipe_parse(filename=path.name, data=data)
    return recipe_save(project=project, name=name, spec=spec, created_by=created_by)


def recipe_parse(*, filename: str, data: bytes) -> tuple[RecipeSpec, str]:
    """Checks an uploaded or local recipe file: extension, size, encoding, then the spec.
    Returns the spec and the name it gives itself (else the file's stem)."""
    fmt = Path(filename).suffix.lower().lstrip(".")
    if fmt not in ("toml", "json"):
        raise ValidationError(f"{filename}: a recipe file ends in .toml or .json")
    if len(data) > RECIPE_FILE_MAX_BYTES:
        raise ValidationError(
            f"{filename}: {len(data):,} bytes; a recipe file may hold at most "
            f"{RECIPE_FILE_MAX_BYTES // 1024} KB"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValidationError(f"{filename}: not UTF-8 text") from None
    try:
        spec, name = recipe_from_text(text, fmt=fmt)
    except (RecipeError, TypeError) as exc:
        raise ValidationError(f"{filename}: {exc}") from None
    return spec, name or Path(filename).stem


def recipe_export(*, recipe: Recipe, fmt: str) -> str:
    return spec_to_text(RecipeSpec.from_dict(recipe.spec), fmt=fmt, name=recipe.name)


def _label_table() -> dict[str, Any]:
    rows = list(
        Label.objects.values_list(
            "pk",
            "mid",
            "name",
            "abstract",
            "blacklisted",
            "needs_visuals",
            "needs_expertise",
            "excluded",
            "word_label__super_category",
        ).order_by("pk")
    )
    return {
        "pk": np.array([r[0] for r in rows], dtype=np.int64),
        "mid": [r[1] for r in rows],
        "name": [r[2] for r in rows],
        "abstract": np.array([r[3] for r in rows], dtype=bool),
        "blacklisted": np.array([r[4] for r in rows], dtype=bool),
        "flags": {f: np.array([r[5 + i] for r in rows], dtype=bool) for i, f in enumerate(FLAGS)},
        "super_category": [r[8] or "" for r in rows],
    }


def _subtree_indices(table: dict[str, Any], roots: list[str]) -> np.ndarray:
    by_key = {mid: i for i, mid in enumerate(table["mid"])}
    by_key.update({name.lower(): i for i, name in enumerate(table["name"])})
    missing = [r for r in roots if r not in by_key and r.lower() not in by_key]
    if missing:
        raise ValidationError(f"excluded_subtrees: no label named {', '.join(missing)}")
    position = {int(pk): i for i, pk in enumerate(table["pk"])}
    children: dict[int, list[int]] = {}
    for parent, child in Label.children.through.objects.values_list("from_label", "to_label"):
        children.setdefault(position[parent], []).append(position[child])
    inside = np.zeros(len(table["pk"]), dtype=bool)
    stack = [by_key.get(r, by_key.get(r.lower())) for r in roots]
    while stack:
        node = stack.pop()
        if not inside[node]:
            inside[node] = True
            stack.extend(children.get(node, []))
    return inside


def _candidate_links(segment_lists: list[str], label_position: dict[int, int]) -> Any:
    """(clip ids, link clip index, link label index) of fetchable AudioSet clips."""
    link_table = Clip.labels.through._meta.db_table
    placeholders = ", ".join(["%s"] * len(segment_lists))
    sql = (
        f"SELECT c.id, l.label_id FROM {Clip._meta.db_table} c "
        f"JOIN {link_table} l ON l.clip_id = c.id "
        f"WHERE c.source = %s AND c.status <> %s AND c.segment_list IN ({placeholders})"
    )
    clip_col, label_col = [], []
    with connection.cursor() as cursor:
        cursor.execute(sql, [Clip.Source.YOUTUBE, Clip.Status.UNAVAILABLE, *segment_lists])
        while rows := cursor.fetchmany(200_000):
            block = np.asarray(rows, dtype=np.int64)
            clip_col.append(block[:, 0])
            label_col.append(block[:, 1])
    clips = np.concatenate(clip_col) if clip_col else np.zeros(0, dtype=np.int64)
    labels = np.concatenate(label_col) if label_col else np.zeros(0, dtype=np.int64)
    clip_ids = np.unique(clips)
    lookup = np.zeros(max(label_position, default=0) + 1, dtype=np.int64)
    for pk, i in label_position.items():
        lookup[pk] = i
    return clip_ids, np.searchsorted(clip_ids, clips), lookup[labels]


def _subset_select(
    spec: RecipeSpec, *, progress: ProgressFn = _no_progress, what: str = "Recipe"
) -> tuple[dict[str, Any], Candidates, Selection]:
    """Loads the candidate clips for the spec and selects from them; stores nothing.
    Shared by subset_build and subset_preview, so a preview shows exactly what a build keeps."""
    progress(0, 4, "reading labels")
    table = _label_table()
    if len(table["pk"]) == 0:
        raise ValidationError("No ontology loaded; run import_ontology first.")
    excluded = _subtree_indices(table, spec.excluded_subtrees)
    usable = ~excluded
    if spec.exclude_abstract:
        usable &= ~table["abstract"]
    if spec.exclude_blacklisted:
        usable &= ~table["blacklisted"]
    for flag in spec.excluded_flags:
        usable &= ~table["flags"][flag]
    position = {int(pk): i for i, pk in enumerate(table["pk"])}

    progress(1, 4, "reading clips")
    clip_ids, link_clip, link_label = _candidate_links(spec.segment_lists, position)
    has_word = np.array([bool(c) for c in table["super_category"]], dtype=bool)
    candidates = Candidates(clip_ids, link_clip, link_label, usable, excluded, has_word)
    progress(2, 4, f"selecting from {len(clip_ids):,} clips")
    try:
        selection = select_subset(spec, candidates)
    except RecipeError as exc:
        raise ValidationError(f"{what}: {exc}") from None
    return table, candidates, selection


def subset_preview(
    *, project: Any, spec: RecipeSpec | dict[str, Any], top_labels: int = 10
) -> dict[str, Any]:
    """What building this spec would select now — the build's report, with only the
    `top_labels` largest labels — without storing anything. `project` is where the
    preview is asked from; candidates are the shared AudioSet clips, as for builds."""
    try:
        spec = spec if isinstance(spec, RecipeSpec) else RecipeSpec.from_dict(spec)
        spec.validate()
    except (RecipeError, TypeError) as exc:
        raise ValidationError(str(exc)) from None
    table, candidates, selection = _subset_select(spec, what="Preview")
    report = _subset_report(spec, table, candidates, selection)
    report["labels"] = report["labels"][: max(0, top_labels)]
    return report


def subset_build(
    *, recipe: Recipe, name: str = "", slug: str = "", progress: ProgressFn = _no_progress
) -> Subset:
    """Selects clips by the recipe and stores them, split, with a report and a bar chart."""
    try:
        spec = RecipeSpec.from_dict(recipe.spec)
    except (RecipeError, TypeError) as exc:
        raise ValidationError(f"Recipe {recipe.name!r}: {exc}") from None
    table, candidates, selection = _subset_select(
        spec, progress=progress, what=f"Recipe {recipe.name!r}"
    )
    report = _subset_report(spec, table, candidates, selection)
    progress(3, 4, f"storing {len(selection.clip_ids):,} clips")
    stamp = timezone.now()
    subset = _subset_store(
        Subset(
            project=recipe.project,
            recipe=recipe,
            name=name or f"{recipe.name} ({stamp:%Y-%m-%d %H:%M})",
            slug=slug or f"{recipe.slug}-{stamp:%Y%m%d-%H%M%S}"[:80],
            spec=spec.to_dict(),
            report=report,
            built_at=stamp,
        ),
        selection,
        _subset_chart(table, selection, title=recipe.name),
    )
    progress(4, 4, "done")
    return subset


def _subset_store(subset: Subset, selection: Selection, chart: bytes) -> Subset:
    with transaction.atomic():
        subset.save()
        # bulk_create of 375k SubsetClip objects took most of a 2 M-clip build's memory
        _insert_many(
            SubsetClip._meta.db_table,
            ["subset_id", "clip_id", "split"],
            [
                (subset.pk, int(clip), str(split))
                for clip, split in zip(selection.clip_ids, selection.splits, strict=True)
            ],
        )
        subset.chart.save(f"{subset.slug}.png", ContentFile(chart), save=True)
    return subset


def subset_from_clips(
    *,
    project: Any,
    name: str,
    clip_ids: Iterable[int],
    slug: str = "",
    val_size: float | int = 0,
    test_size: float | int = 0,
    seed: int = 0,
) -> Subset:
    """A hand-picked subset: exactly these clips (local ones too), split by the seed, with
    the same report and chart as a recipe build. The demo uses it for its local clips."""
    from curation.recipes import _assign_splits  # the split rule recipes use, not a copy

    ids = np.unique(np.fromiter(clip_ids, dtype=np.int64))
    if len(ids) != Clip.objects.filter(pk__in=ids.tolist()).count():
        raise ValidationError(f"Subset {name!r}: some of the clips do not exist.")
    table = _label_table()
    position = {int(pk): i for i, pk in enumerate(table["pk"])}
    links = np.array(
        Clip.labels.through.objects.filter(clip_id__in=ids.tolist()).values_list(
            "clip_id", "label_id"
        ),
        dtype=np.int64,
    ).reshape(-1, 2)
    link_clip = np.searchsorted(ids, links[:, 0])
    link_label = np.array([position[int(pk)] for pk in links[:, 1]], dtype=np.int64)
    n_labels = len(table["pk"])
    counts = np.bincount(link_label, minlength=n_labels)
    every = np.ones(n_labels, dtype=bool)
    candidates = Candidates(ids, link_clip, link_label, every, ~every, every)
    order = ids[np.random.default_rng(seed).permutation(len(ids))]
    try:
        splits = _assign_splits(len(order), val_size, test_size)
    except RecipeError as exc:
        raise ValidationError(f"Subset {name!r}: {exc}") from None
    selection = Selection(order, splits, counts, counts, counts > 0)
    spec = {"hand_picked": len(ids), "val_size": val_size, "test_size": test_size, "seed": seed}
    report = _subset_report(RecipeSpec(), table, candidates, selection)
    subset = Subset(project=project, name=name, slug=slug or slugify(name)[:80], spec=spec)
    subset.report = report
    return _subset_store(subset, selection, _subset_chart(table, selection, title=name))


def _subset_report(
    spec: RecipeSpec, table: dict[str, Any], data: Candidates, selection: Selection
) -> dict[str, Any]:
    before, after, kept = selection.counts_before, selection.counts_after, selection.kept_labels
    labels = [
        {
            "mid": table["mid"][i],
            "name": table["name"][i],
            "before": int(before[i]),
            "after": int(after[i]),
        }
        for i in np.flatnonzero(kept)
    ]
    labels.sort(key=lambda row: -row["after"])
    categories = sorted({c for c in table["super_category"] if c})
    category_index = {c: i for i, c in enumerate(categories)}
    label_category = np.array(
        [category_index.get(c, -1) for c in table["super_category"]], dtype=np.int64
    )
    chosen = np.isin(data.clip_ids, selection.clip_ids)
    mask = chosen[data.link_clip] & kept[data.link_label] & (label_category[data.link_label] >= 0)
    pairs = np.unique(
        np.stack([data.link_clip[mask], label_category[data.link_label[mask]]]), axis=1
    )
    per_category = np.bincount(pairs[1], minlength=len(categories)) if pairs.size else []
    splits = {s: int((selection.splits == s).sum()) for s in ("train", "val", "test")}
    return {
        "candidate_clips": len(data.clip_ids),
        "selected_clips": len(selection.clip_ids),
        "labels_kept": int(kept.sum()),
        "splits": splits,
        "skew_before": skew(before[kept]),
        "skew_after": skew(after[kept]),
        "super_categories": {c: int(n) for c, n in zip(categories, per_category, strict=True)},
        "labels": labels,
    }


def _subset_chart(table: dict[str, Any], selection: Selection, *, title: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    kept = np.flatnonzero(selection.kept_labels)
    order = kept[np.argsort(-selection.counts_after[kept], kind="stable")][:40]
    names = [table["name"][i] for i in order][::-1]
    height = max(2.5, 0.22 * len(names) + 1)
    figure, axes = plt.subplots(figsize=(7, height), dpi=100)
    axes.barh(names, selection.counts_before[order][::-1], color="#d0d7de", label="candidates")
    axes.barh(names, selection.counts_after[order][::-1], color="#1f6feb", label="selected")
    axes.set_xlabel("clips per label")
    axes.set_title(f"{title}: {len(selection.clip_ids):,} clips", fontsize=10)
    axes.tick_params(axis="y", labelsize=7)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def subset_build_job(
    *, job: Any, progress: ProgressFn, recipe_id: int, name: str = "", slug: str = ""
) -> dict[str, Any]:
    recipe = Recipe.objects.select_related("project").get(pk=recipe_id)
    subset = subset_build(recipe=recipe, name=name, slug=slug, progress=progress)
    report = subset.report
    return {
        "subset": subset.slug,
        "selected_clips": report["selected_clips"],
        "labels_kept": report["labels_kept"],
        "skew_after": report["skew_after"],
    }
