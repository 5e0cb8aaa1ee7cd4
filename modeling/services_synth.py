"""SynthScenes in the app: synthetic scenes become clips with AudioSet labels, imported
reference captions and a split subset, so captioners can be trained offline."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from core.models import Job, Project
from core.progress import ProgressFn, no_progress

# scenes generated and imported at a time: bounds the temporary WAVs on disk (~0.6 MB each)
SYNTH_CHUNK = 100
MAX_SCENES = 100_000
EVAL_CAPTIONS = 5  # captions per val/test clip, as AudioCaps and Clotho


def synthscenes_slug(*, seed: int, train: int, val: int, test: int) -> str:
    return f"synthscenes-{seed}-{train}-{val}-{test}"


def synthscenes_make(
    *,
    project: Project,
    train: int,
    val: int,
    test: int,
    seed: int = 0,
    train_captions: int = 2,
    video: bool = True,
    progress: ProgressFn = no_progress,
) -> dict[str, Any]:
    """Prepares `train + val + test` SynthScenes (scene i of set `seed`, written by
    `synthscenes.prepare_synthscenes` a chunk at a time), imports them as the project's
    own clips at its sample rate through `clips_import_local` (with their AudioSet labels
    and, with `video`, each scene's short MP4 as the clip's video hint), builds the
    hand-picked subset `synthscenes-<seed>-<train>-<val>-<test>` with those splits, and
    imports reference captions: 5 per val/test clip, `train_captions` per train clip, with
    external ids `synth-<seed>-<i>#<n>`.

    Idempotent: running it again with the same arguments changes nothing; the project's
    clips already present (same audio) are reused as they are (with or without their
    video). Another project's SynthScenes of the same seed are not shared: each project
    gets clips and captions of its own.
    """
    from annotation.models import Caption
    from curation.models import Label, Subset, SubsetClip
    from curation.services import clips_import_local, subset_from_clips
    from synthscenes import EVENT_TYPES, prepare_synthscenes

    counts = {"train": train, "val": val, "test": test}
    bad = [f"{name}={n}" for name, n in counts.items() if n < 0]
    if bad:
        raise ValidationError(f"SynthScenes counts must be >= 0, got {', '.join(bad)}.")
    total = train + val + test
    if not 1 <= total <= MAX_SCENES:
        raise ValidationError(f"Ask for 1 to {MAX_SCENES} scenes in all, not {total}.")
    if seed < 0:
        raise ValidationError(f"The seed must be >= 0, not {seed}.")
    if not 1 <= train_captions <= EVAL_CAPTIONS:
        raise ValidationError(f"train_captions must be 1 to {EVAL_CAPTIONS}, not {train_captions}.")
    slug = synthscenes_slug(seed=seed, train=train, val=val, test=test)
    existing = Subset.objects.filter(project=project, slug=slug).first()
    if existing is not None:
        return {"subset": slug, "scenes": total, "created": 0, "already_made": True}
    wanted = {mid for kind in EVENT_TYPES.values() for mid in kind.mids}
    missing = sorted(
        wanted - set(Label.objects.filter(mid__in=wanted).values_list("mid", flat=True))
    )
    if missing:
        raise ValidationError(
            f"SynthScenes needs the AudioSet labels {missing}; import the ontology first "
            "(python manage.py import_ontology ontology.json)."
        )

    rate = int(project.audio_sample_rate)
    clip_ids: list[int] = []
    scene_captions: list[tuple[str, list[str]]] = []
    created = 0
    progress(0, total, "generating scenes")
    with tempfile.TemporaryDirectory(prefix="earmark-synth-") as tmp:
        for start in range(0, total, SYNTH_CHUNK):
            chunk = Path(tmp) / f"{start}"
            scenes = prepare_synthscenes(
                chunk,
                seed=seed,
                start=start,
                count=min(SYNTH_CHUNK, total - start),
                sample_rate=rate,
                n_captions=EVAL_CAPTIONS,
                video=video,
            )
            result = clips_import_local(
                project=project,
                paths=[scene.audio for scene in scenes],
                labels={scene.audio.name: scene.mids for scene in scenes},
                videos={s.audio.name: s.video for s in scenes if s.video is not None},
                sample_rate=rate,
            )
            clip_ids += result["clip_ids"]
            created += result["created"]
            scene_captions += [(scene.name, scene.captions) for scene in scenes]
            shutil.rmtree(chunk)
            progress(
                start + len(scenes), total, f"imported {start + len(scenes)} of {total} scenes"
            )

    with transaction.atomic():
        subset = subset_from_clips(
            project=project,
            name=f"SynthScenes seed {seed} ({train}/{val}/{test})",
            slug=slug,
            clip_ids=clip_ids,
            val_size=val,
            test_size=test,
            seed=seed,
        )
        splits = dict(SubsetClip.objects.filter(subset=subset).values_list("clip_id", "split"))
        present = set(
            Caption.objects.filter(
                clip_id__in=clip_ids, provenance=Caption.Provenance.IMPORTED, imported_into=project
            ).values_list("clip_id", "external_id")
        )
        new = []
        for clip_id, (name, texts) in zip(clip_ids, scene_captions, strict=True):
            keep = EVAL_CAPTIONS if splits[clip_id] in ("val", "test") else train_captions
            for n, text in enumerate(texts[:keep], start=1):
                external_id = f"{name}#{n}"
                if (clip_id, external_id) not in present:
                    new.append(
                        Caption(
                            provenance=Caption.Provenance.IMPORTED,
                            imported_into=project,
                            assignment=None,
                            clip_id=clip_id,
                            text=text,
                            external_id=external_id,
                        )
                    )
        Caption.objects.bulk_create(new, batch_size=1000)
        # the provenance record that makes these captions part of the project's corpus
        # (exports and training runs read imported captions through it)
        _record_import(project=project, subset=subset, splits=splits, seed=seed, new=new)
    progress(total, total, "done")
    per_split = {s: sum(1 for v in splits.values() if v == s) for s in ("train", "val", "test")}
    return {
        "subset": slug,
        "scenes": total,
        "created": created,
        "already_present": total - created,
        "captions": len(new),
        "train_clips": per_split["train"],
        "val_clips": per_split["val"],
        "test_clips": per_split["test"],
        "already_made": False,
    }


def _record_import(
    *, project: Project, subset: Any, splits: dict[int, str], seed: int, new: list[Any]
) -> None:
    from corpus.models import CorpusFormat, CorpusImport

    for split in sorted(set(splits.values())):
        clips = [clip_id for clip_id, s in splits.items() if s == split]
        CorpusImport.objects.create(
            project=project,
            subset=subset,
            format=CorpusFormat.SYNTHSCENES,
            split=split,
            file_name=f"{subset.slug} ({split})",
            sha256=hashlib.sha256(f"synthscenes:{seed}:{sorted(clips)}".encode()).hexdigest(),
            rows=len(clips),
            clips_created=len(clips),
            captions_created=sum(1 for c in new if splits.get(c.clip_id) == split),
            captions_existing=0,
        )


def synthscenes_make_job(
    *,
    job: Job,
    progress: ProgressFn,
    train: int,
    val: int,
    test: int,
    seed: int = 0,
    train_captions: int = 2,
    video: bool = True,
) -> dict[str, Any]:
    if job.project is None:
        raise ValidationError("SynthScenes are made for a project.")
    return synthscenes_make(
        project=job.project,
        train=train,
        val=val,
        test=test,
        seed=seed,
        train_captions=train_captions,
        video=video,
        progress=progress,
    )
