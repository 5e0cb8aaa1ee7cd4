"""Ranking a batch's HITs: each clip scored with the batch's strategy (active/scoring.py)
from the promoted run's suggestions, a committee of other finished runs and the clips' word
hints. The priorities land in ClipScore and Hit.priority, which hit_claim orders by."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from active import scoring
from active.models import BatchConfig, ClipScore, Presuggest, Strategy
from active.services.config import batch_config
from annotation.models import Assignment, Batch, Caption, Hit, HitClip
from core.models import Job, Project, Role
from core.progress import ProgressFn
from core.services import require_role
from curation.models import Label
from modeling.models import Suggestion, TrainingRun

COMMITTEE_RUNS = 3  # other finished runs whose suggestions join the committee


def promoted_run(project: Project) -> TrainingRun | None:
    return (
        TrainingRun.objects.filter(project=project, promoted_at__isnull=False)
        .order_by("-promoted_at")
        .first()
    )


def clip_labels(clip_ids: Iterable[int]) -> dict[int, list[str]]:
    """Each clip's word hints as annotators see them (the word label, else the label)."""
    out: dict[int, list[str]] = defaultdict(list)
    rows = Label.objects.filter(clips__in=list(clip_ids)).values_list(
        "clips", "name", "word_label__name"
    )
    for clip_id, name, word in rows:
        out[clip_id].append(word or name)
    return out


def _evidence(
    project: Project, clip_ids: list[int]
) -> tuple[list[scoring.ClipEvidence], TrainingRun | None]:
    run = promoted_run(project)
    labels = clip_labels(clip_ids)
    best: dict[int, Suggestion] = {}
    committee: dict[int, list[str]] = defaultdict(list)
    if run is not None:
        best = {s.clip_id: s for s in Suggestion.objects.filter(run=run, clip_id__in=clip_ids)}
        others = (
            TrainingRun.objects.filter(project=project, state=TrainingRun.State.SUCCEEDED)
            .exclude(pk=run.pk)
            .order_by("-finished_at", "-pk")
            .values_list("pk", flat=True)[:COMMITTEE_RUNS]
        )
        for clip_id, text in Suggestion.objects.filter(
            run__in=list(others), clip_id__in=clip_ids
        ).values_list("clip_id", "text"):
            committee[clip_id].append(text)
    evidence = []
    for clip_id in clip_ids:
        s = best.get(clip_id)
        evidence.append(
            scoring.ClipEvidence(
                key=clip_id,
                mean_entropy=s.mean_entropy if s else None,
                hypotheses=list(s.hypotheses) if s else [],
                committee=committee.get(clip_id, []),
                labels=sorted(set(labels.get(clip_id, []))),
            )
        )
    return evidence, run


def _covered_labels(project: Project, exclude: Iterable[int]) -> dict[str, int]:
    """How often each word hint occurs on clips that already have a caption in the project
    (approved or waiting for review): what diversity tries to add to."""
    captioned = (
        Caption.objects.filter(
            Q(assignment__hit__batch__project=project)
            & Q(assignment__state__in=[Assignment.State.SUBMITTED, Assignment.State.APPROVED])
        )
        .exclude(clip_id__in=list(exclude))
        .values_list("clip_id", flat=True)
        .distinct()
    )
    counts: dict[str, int] = defaultdict(int)
    for labels in clip_labels(set(captioned)).values():
        for label in set(labels):
            counts[label] += 1
    return counts


def batch_configure(
    *, batch: Batch, user: User, strategy: str, presuggest: str, seed: int | None = None
) -> BatchConfig:
    """Chooses the batch's ranking strategy and pre-suggestion mode (researchers), then
    ranks its HITs with the strategy."""
    require_role(batch.project, user, Role.RESEARCHER)
    if strategy not in Strategy.values:
        raise ValidationError(
            {"strategy": f"Unknown strategy {strategy!r}; use one of {', '.join(Strategy.values)}."}
        )
    if presuggest not in Presuggest.values:
        raise ValidationError({"presuggest": f"Unknown mode {presuggest!r}; use blind or edit."})
    with transaction.atomic():
        config = batch_config(batch=batch)
        config.strategy, config.presuggest = strategy, presuggest
        if seed is not None:
            config.seed = seed
        config.full_clean()
        config.save()
        batch_rank(batch=batch)
    config.refresh_from_db()
    return config


def batch_rank(*, batch: Batch) -> list[ClipScore]:
    """Scores the batch's clips with its strategy and writes the priorities: each clip's in
    ClipScore, each HIT's (its best clip's) in Hit.priority, so hit_claim hands out the
    most useful HITs first. Priorities lie in (0, 1] whatever the strategy, so batches of
    different strategies compete fairly in one worker's queue."""
    config = batch_config(batch=batch)
    hit_clips = list(HitClip.objects.filter(hit__batch=batch).values_list("hit_id", "clip_id"))
    clip_ids = sorted({clip_id for _, clip_id in hit_clips})
    evidence, run = _evidence(batch.project, clip_ids)
    cider = None
    if config.strategy == Strategy.COMMITTEE:
        documents = [scoring.committee_of(e) for e in evidence]
        documents = [d for d in documents if d]
        cider = scoring.CiderD(documents or [[""]])
    covered = (
        _covered_labels(batch.project, clip_ids)
        if config.strategy in (Strategy.DIVERSITY, Strategy.HYBRID)
        else {}
    )
    ranked = scoring.rank(
        config.strategy, evidence, cider=cider, covered=covered, seed=config.seed + batch.pk
    )
    now = timezone.now()
    rows = [
        ClipScore(
            batch=batch,
            clip_id=r.key,
            strategy=config.strategy,
            score=r.score,
            priority=r.priority,
            rank=number,
            details=r.details,
            created_at=now,
        )
        for number, r in enumerate(ranked, start=1)
    ]
    by_clip = {r.key: r.priority for r in ranked}
    per_hit: dict[int, float] = defaultdict(float)
    for hit_id, clip_id in hit_clips:
        per_hit[hit_id] = max(per_hit[hit_id], by_clip[clip_id])
    with transaction.atomic():
        ClipScore.objects.filter(batch=batch).delete()
        ClipScore.objects.bulk_create(rows, batch_size=1000)
        hits = [Hit(pk=hit_id, priority=priority) for hit_id, priority in per_hit.items()]
        Hit.objects.bulk_update(hits, ["priority"], batch_size=1000)
        BatchConfig.objects.filter(pk=config.pk).update(ranked_at=now, ranked_with=run)
    return rows


def batches_rank(*, project: Project) -> int:
    """Re-ranks the project's open batches (after a promotion brings new suggestions)."""
    open_batches = Batch.objects.filter(
        project=project, state__in=[Batch.State.DRAFT, Batch.State.PUBLISHED, Batch.State.PAUSED]
    )
    n = 0
    for batch in open_batches:
        batch_rank(batch=batch)
        n += 1
    return n


def batch_rank_job(*, job: Job, progress: ProgressFn, batch_id: int) -> dict[str, Any]:
    batch = Batch.objects.select_related("project").get(pk=batch_id)
    progress(0, 1, "ranking")
    rows = batch_rank(batch=batch)
    return {"batch": batch.pk, "clips": len(rows), "strategy": batch_config(batch=batch).strategy}
