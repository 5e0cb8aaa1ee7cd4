"""Suggestions: a finished run captions clips (beam search) and stores one Suggestion each.

The decoding itself is `modeling.ml.infer`; here are the clips to caption, their features
(and video) from the caches, and the rows written.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core.models import Job
from core.progress import ProgressFn, no_progress
from curation.models import Clip, Subset
from curation.queries import project_clips
from modeling import datasets
from modeling.ml.decoding import Hypothesis
from modeling.ml.vocab import Vocabulary
from modeling.models import Suggestion, TrainingRun


def clips_caption(
    *,
    run: TrainingRun,
    clip_ids: Iterable[int] | None = None,
    subset: Subset | None = None,
    beam_size: int | None = None,
    progress: ProgressFn = no_progress,
    batch_size: int = 32,
) -> dict[str, Any]:
    """Captions clips of the run's project with the run's model (beam search, by default as
    wide as the run's recipe decodes: its decoding.beam_size) and stores
    one Suggestion per clip: the best hypothesis with its log-probability and mean token
    entropy, and the rest of the beam. Clips without audio are skipped and counted; a clip
    the project does not see (another project's) is refused, since its suggestion would
    show that project's audio to this one."""
    from modeling.ml.checkpoint import load_checkpoint
    from modeling.ml.infer import caption_clips
    from modeling.ml.runtime import pick_device

    if run.state != TrainingRun.State.SUCCEEDED or not run.checkpoint:
        raise ValidationError(f"Run #{run.pk} is {run.state}; it has no model to caption with.")
    run_config, feature_config = datasets.run_configs(run)
    if beam_size is None:
        beam_size = run_config.decoding.beam_size
    if beam_size < 1 or beam_size > 10:
        raise ValidationError("The beam size is between 1 and 10.")
    ours = project_clips(run.project, subset=subset)
    clips = ours.filter(status=Clip.Status.READY).exclude(audio="")
    if clip_ids is not None:
        wanted = sorted(set(clip_ids))
        known = set(ours.filter(pk__in=wanted).values_list("pk", flat=True))
        if set(wanted) - known:
            where = f"subset {subset.slug!r}" if subset is not None else "project"
            raise ValidationError(
                f"Clip id(s) {sorted(set(wanted) - known)} are not clips of the run's "
                f"{where} ({run.project.slug!r})."
            )
        clips = clips.filter(pk__in=wanted)
    rows = list(clips.order_by("pk").values_list("pk", "audio", "content_sha256"))
    device = pick_device(run_config.train.device)
    # read in place on disk storage; a bucket's checkpoint is copied once to a temporary file
    with datasets.local_file(run.checkpoint.name) as local:
        checkpoint = load_checkpoint(local, map_location=device)
    model, vocab = checkpoint.model.to(device), checkpoint.vocab
    cache = datasets.feature_cache(feature_config)
    video_config = datasets.run_video_config(run)
    video_cache = datasets.video_cache(video_config) if video_config is not None else None
    # the same video training read: the features video when fetched, else the hint
    videos = datasets.clip_video_names([r[0] for r in rows])
    stored = 0
    total = len(rows)
    progress(0, total, "captioning clips")
    for start in range(0, total, batch_size):
        chunk = rows[start : start + batch_size]
        group = []
        for pk, audio, sha in chunk:
            with datasets.local_file(audio) as path:
                features = cache.get_or_compute(path, sha or None)
            clip = datasets.ClipCaptions(
                clip_id=pk, texts=[], labels=[], audio=audio, features=features
            )
            if video_cache is not None:
                try:
                    clip.video = datasets.clip_video(video_cache, videos.get(pk, ("", False))[0])
                except ValueError:  # an undecodable video: caption from the audio alone
                    clip.video = video_cache.empty()
            group.append(clip)
        hypotheses = caption_clips(
            model,
            vocab,
            group,
            beam_size=beam_size,
            device=device,
            length_penalty=run_config.decoding.length_penalty,
        )
        now = timezone.now()
        suggestions = [
            _suggestion(run, clip.clip_id, hyps, vocab, beam_size, now)
            for clip, hyps in zip(group, hypotheses, strict=True)
            if hyps
        ]
        with transaction.atomic():
            Suggestion.objects.filter(
                run=run, clip_id__in=[s.clip_id for s in suggestions]
            ).delete()
            Suggestion.objects.bulk_create(suggestions)
        stored += len(suggestions)
        progress(min(start + batch_size, total), total, "captioning clips")
    return {"run": run.pk, "clips": total, "suggestions": stored, "beam_size": beam_size}


def _suggestion(
    run: TrainingRun,
    clip_id: int,
    hyps: list[Hypothesis],
    vocab: Vocabulary,
    beam_size: int,
    created_at: datetime,
) -> Suggestion:
    best = hyps[0]
    return Suggestion(
        run=run,
        clip_id=clip_id,
        text=vocab.decode(best.tokens),
        log_prob=min(0.0, best.log_prob),
        mean_entropy=max(0.0, best.entropy),
        hypotheses=[
            {
                "text": vocab.decode(h.tokens),
                "log_prob": h.log_prob,
                "score": h.score,
                "entropy": h.entropy,
            }
            for h in hyps
        ],
        beam_size=beam_size,
        created_at=created_at,
    )


def clips_caption_job(
    *,
    job: Job,
    progress: ProgressFn,
    run_id: int,
    clip_ids: list[int] | None = None,
    subset_id: int | None = None,
    beam_size: int | None = None,
) -> dict[str, Any]:
    run = TrainingRun.objects.get(pk=run_id)
    subset = Subset.objects.get(pk=subset_id, project=run.project) if subset_id else None
    return clips_caption(
        run=run, clip_ids=clip_ids, subset=subset, beam_size=beam_size, progress=progress
    )
