"""Importing audio from local files: single files (decoded, hashed, stored as clips) and
uploaded archives of them, optionally gathered into a hand-picked subset."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils.text import slugify

from core.models import Job, Project
from core.progress import ProgressFn, no_progress
from core.text import file_name_problem
from curation import media
from curation.models import Clip, Label, Subset
from curation.services.subsets import subset_from_clips

MAX_LOCAL_SECONDS = 60.0
# Decoding goes this far past the limit, so a file just over it is seen to be over.
_DECODE_MARGIN_SECONDS = 1.0


def _prepare_local(src: Path, workdir: Path, sample_rate: int) -> dict[str, Any]:
    if problem := file_name_problem(src.name):
        raise media.MediaError(f"{src.name!r}: {problem}")
    if not src.is_file():
        raise media.MediaError(f"{src}: no such file")
    info = media.probe(src)
    if info.duration_seconds > MAX_LOCAL_SECONDS:
        raise media.MediaError(
            f"{src.name}: {info.duration_seconds:.1f} s long; clips may last at most "
            f"{MAX_LOCAL_SECONDS:.0f} s"
        )
    wav = workdir / f"{src.stem}.wav"
    # the header's duration above is the file's claim; the samples decide
    duration = media.decode_audio(
        src, wav, seconds=MAX_LOCAL_SECONDS + _DECODE_MARGIN_SECONDS, sample_rate=sample_rate
    )
    if duration > MAX_LOCAL_SECONDS:
        raise media.MediaError(
            f"{src.name}: lasts more than {MAX_LOCAL_SECONDS:.0f} s once decoded (its header "
            f"says {info.duration_seconds:.1f} s); clips may last at most "
            f"{MAX_LOCAL_SECONDS:.0f} s"
        )
    return {
        "src": src,
        "sample_rate": sample_rate,
        "wav": wav,
        "sha256": media.sha256_of(wav),
        "peaks": media.waveform_peaks(wav),
        "duration": duration,
    }


def clips_import_local(
    *,
    project: Project | None,
    paths: list[Path],
    labels: dict[str, list[str]] | None = None,
    videos: dict[str, Path] | None = None,
    skip_broken: bool = False,
    progress: ProgressFn = no_progress,
    sample_rate: int = media.AUDIO_SAMPLE_RATE,
) -> dict[str, Any]:
    """Imports local audio files as clips of `project`: decoded to mono WAV at
    `sample_rate` (the project's rate), hashed, peaks computed. Without a project (staff
    on the command line) the clips are site-wide, and no project sees them until staff
    put them into one of its subsets.

    `labels` maps a file name to AudioSet ids; `videos` maps a file name to a video hint.
    Broken files stop the import, naming each one, before anything is stored — unless
    `skip_broken`, which imports the rest and lists the broken ones in the result.
    Re-importing audio the project has already is a no-op, except for a clip whose stored
    file broke since (Clip.media_broken_at), which gets the audio again and is ready once
    more ("restored"); audio another project has is imported again, as this project's own
    clip (never that project's row, which carries its file name, labels, video hint and
    captions).
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
        created = skipped = restored = 0
        clip_ids: list[int] = []
        for done, item in enumerate(prepared, start=len(paths) + 1):
            name = item["src"].name
            present = Clip.objects.filter(
                source=Clip.Source.LOCAL, project=project, content_sha256=item["sha256"]
            ).first()
            if present is not None and present.media_broken_at is not None:
                _restore_local_clip(present, item)
                restored += 1
                clip_ids.append(present.pk)
                continue
            if present is not None:
                skipped += 1
                clip_ids.append(present.pk)
                continue
            clip = _store_local_clip(
                item, [known[m] for m in labels.get(name, [])], videos.get(name), project
            )
            clip_ids.append(clip.pk)
            created += 1
            progress(done, total, f"stored {name}")
    progress(total, total, "done")
    return {
        "files": len(paths),
        "created": created,
        "already_present": skipped,
        "restored": restored,
        "broken": broken,
        "clip_ids": clip_ids,
    }


def _store_local_clip(
    item: dict[str, Any], labels: list[Label], video: Path | None, project: Project | None
) -> Clip:
    clip = Clip(
        source=Clip.Source.LOCAL,
        project=project,
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


def _restore_local_clip(clip: Clip, item: dict[str, Any]) -> None:
    """Stores the audio of a clip whose stored file broke (clip_mark_broken) once more: the
    same decoded content (its hash matched), so the clip keeps its labels, captions and
    HITs, which are offered again. The broken file is deleted once this commits."""
    stored: Any = None
    try:
        with transaction.atomic():
            locked = Clip.objects.select_for_update().get(pk=clip.pk)
            broken = locked.audio.name
            with item["wav"].open("rb") as handle:
                locked.audio.save(f"{item['sha256'][:16]}.wav", File(handle), save=False)
                stored = locked.audio
            locked.status = Clip.Status.READY
            locked.error = ""
            locked.media_broken_at = None
            locked.duration_seconds = item["duration"]
            locked.sample_rate = item["sample_rate"]
            locked.peaks = item["peaks"]
            locked.save(
                update_fields=[
                    "audio", "status", "error", "media_broken_at",
                    "duration_seconds", "sample_rate", "peaks",
                ]
            )  # fmt: skip
            if broken and broken != locked.audio.name:
                storage = locked.audio.storage
                transaction.on_commit(lambda: storage.delete(broken), robust=True)
    except Exception:
        if stored is not None:
            stored.storage.delete(stored.name)
        raise


def clips_import_local_job(
    *,
    job: Job,
    progress: ProgressFn,
    paths: list[str],
    labels: dict[str, list[str]] | None = None,
    videos: dict[str, str] | None = None,
    skip_broken: bool = False,
    sample_rate: int = media.AUDIO_SAMPLE_RATE,
) -> dict[str, Any]:
    return clips_import_local(
        project=job.project,
        paths=[Path(p) for p in paths],
        labels=labels,
        videos={k: Path(v) for k, v in (videos or {}).items()},
        skip_broken=skip_broken,
        progress=progress,
        sample_rate=sample_rate,
    )


# Archives ---------------------------------------------------------------------------------

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
    project: Project,
    stored_name: str,
    upload_name: str,
    subset_name: str = "",
    progress: ProgressFn = no_progress,
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
                unpacked = archives.unpack(
                    local,
                    name=upload_name,
                    into=Path(tmp) / "files",
                    max_unpacked_bytes=settings.ARCHIVE_UNPACKED_MAX_BYTES,
                    max_expansion_ratio=settings.ARCHIVE_MAX_EXPANSION_RATIO,
                )
            except archives.ArchiveError as exc:
                raise ValidationError(str(exc)) from None
            result = clips_import_local(
                project=project,
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
    job: Job,
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
