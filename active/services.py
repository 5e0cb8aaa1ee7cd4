"""The active-learning loop: ranking a batch's HITs, disagreement flags, pre-suggestions in
edit mode, automatic retraining with promotion only when the new run is better, and the
learning curve.

Scores come from active/scoring.py (pure); this module reads the rows they need and writes
the results: ClipScore and Hit.priority (which hit_claim already orders by), crowd.Flag via
crowd.services.flag_create, Presuggestion and CaptionEdit, Retrain and PromotionDecision.
torch is imported only inside the functions that train or score a model.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from active import scoring
from active.models import (
    BatchConfig,
    CaptionEdit,
    ClipScore,
    CurvePoint,
    Presuggest,
    Presuggestion,
    ProjectConfig,
    PromotionDecision,
    Retrain,
    Strategy,
)
from annotation.models import Assignment, Batch, Caption, Hit, HitClip
from core.models import Job, Project, Role
from core.services import job_enqueue, require_role
from corpus.models import Snapshot
from curation.models import Clip, Label, Split
from modeling.models import Suggestion, TrainingRun

log = logging.getLogger(__name__)
ProgressFn = Callable[..., None]
COMMITTEE_RUNS = 3  # other finished runs whose suggestions join the committee
CORPUS_CLIPS = 2000  # clips whose captions give CIDEr-D its document frequencies
METRIC = "CIDEr-D"


def _no_progress(*_: Any, **__: Any) -> None:
    pass


# Settings rows ---------------------------------------------------------------------------


def batch_config(*, batch: Batch) -> BatchConfig:
    config, _ = BatchConfig.objects.get_or_create(batch=batch)
    return config


def project_config(*, project: Project) -> ProjectConfig:
    config, _ = ProjectConfig.objects.get_or_create(project=project)
    return config


def project_configure(
    *,
    project: Project,
    user: Any,
    model_name: str,
    preset: str = "small",
    overrides: Sequence[str] = (),
    auto_retrain: bool = False,
) -> ProjectConfig:
    """Sets the model the loop retrains (checked as `train` would check it)."""
    require_role(project, user, Role.RESEARCHER)
    from modeling.services import run_spec

    run_spec(model_name=model_name, preset=preset, overrides=overrides)  # ValidationError
    config = project_config(project=project)
    config.model_name, config.preset = model_name, preset
    config.overrides, config.auto_retrain = list(overrides), auto_retrain
    config.updated_at = timezone.now()
    config.save()
    return config


def batch_configure(
    *, batch: Batch, user: Any, strategy: str, presuggest: str, seed: int | None = None
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


# Ranking ---------------------------------------------------------------------------------


def promoted_run(project: Project) -> TrainingRun | None:
    return (
        TrainingRun.objects.filter(project=project, promoted_at__isnull=False)
        .order_by("-promoted_at")
        .first()
    )


def _clip_labels(clip_ids: Iterable[int]) -> dict[int, list[str]]:
    """Each clip's word hints as annotators see them (the word label, else the label)."""
    out: dict[int, list[str]] = defaultdict(list)
    rows = Label.objects.filter(clips__in=list(clip_ids)).values_list(
        "clips", "name", "word_label__name"
    )
    for clip_id, name, word in rows:
        out[clip_id].append(word or name)
    return out


def _evidence(project: Project, clip_ids: list[int]) -> tuple[list[scoring.ClipEvidence], Any]:
    run = promoted_run(project)
    labels = _clip_labels(clip_ids)
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
    for labels in _clip_labels(set(captioned)).values():
        for label in set(labels):
            counts[label] += 1
    return counts


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


# Flags -----------------------------------------------------------------------------------


def flag_thresholds() -> scoring.FlagThresholds:
    return scoring.FlagThresholds(
        model_max_entropy=settings.ACTIVE_FLAG_MODEL_MAX_ENTROPY,
        model_min_cider=settings.ACTIVE_FLAG_MODEL_MIN_CIDER,
        consensus_min_cider=settings.ACTIVE_FLAG_CONSENSUS_MIN_CIDER,
        consensus_min_captions=settings.ACTIVE_FLAG_CONSENSUS_MIN_CAPTIONS,
        hints=settings.ACTIVE_FLAG_HINTS,
        model_defers_to_consensus=settings.ACTIVE_FLAG_MODEL_DEFERS_TO_CONSENSUS,
    )


def _live_captions(project: Project) -> QuerySet[Caption]:
    """Captions of the project that count as what people heard: submitted or approved
    crowd captions, and imported ones on the project's clips."""
    crowd = Q(
        provenance=Caption.Provenance.CROWD,
        assignment__hit__batch__project=project,
        assignment__state__in=[Assignment.State.SUBMITTED, Assignment.State.APPROVED],
    )
    imported = Q(provenance=Caption.Provenance.IMPORTED, clip__subsets__project=project)
    return Caption.objects.filter(crowd | imported).distinct()


def _texts_by_clip(captions: QuerySet[Caption]) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for pk, clip_id, text, fixed in captions.order_by("pk").values_list(
        "pk", "clip_id", "text", "fixed_text"
    ):
        out[clip_id].append((pk, fixed or text))
    return out


def captions_flag(*, captions: QuerySet[Caption], project: Project) -> dict[str, Any]:
    """Runs the disagreement checks on captions not checked yet and writes a crowd.Flag for
    each finding (reason plus evidence, which the review queue shows) and a FlagCheck for
    every caption looked at. CIDEr-D's document frequencies come from the project's
    captions (up to CORPUS_CLIPS clips), the model evidence from the promoted run."""
    from active.models import FlagCheck
    from crowd.services import flag_create

    todo = list(
        captions.filter(flag_check__isnull=True).select_related("assignment__hit").order_by("pk")
    )
    if not todo:
        return {"checked": 0, "flagged": 0}
    clip_ids = sorted({c.clip_id for c in todo})
    live = _live_captions(project)
    on_clips = _texts_by_clip(live.filter(clip_id__in=clip_ids))
    # the captions being checked count too, whatever their assignment's state
    for caption in todo:
        if all(pk != caption.pk for pk, _ in on_clips[caption.clip_id]):
            on_clips[caption.clip_id].append((caption.pk, caption.current_text))
    corpus_clips = list(
        live.exclude(clip_id__in=clip_ids)
        .values_list("clip_id", flat=True)
        .distinct()
        .order_by("-clip_id")[:CORPUS_CLIPS]
    )
    documents = [[t for _, t in texts] for texts in on_clips.values()]
    documents += [
        [t for _, t in texts]
        for texts in _texts_by_clip(live.filter(clip_id__in=corpus_clips)).values()
    ]
    run = promoted_run(project)
    suggestions = (
        {s.clip_id: s for s in Suggestion.objects.filter(run=run, clip_id__in=clip_ids)}
        if run
        else {}
    )
    documents += [[s.text] for s in suggestions.values()]
    cider = scoring.CiderD(documents)
    labels = _clip_labels(clip_ids)
    thresholds = flag_thresholds()
    flagged = 0
    with transaction.atomic():
        for caption in todo:
            suggestion = suggestions.get(caption.clip_id)
            others = [t for pk, t in on_clips[caption.clip_id] if pk != caption.pk]
            findings = scoring.caption_findings(
                text=caption.current_text,
                others=others,
                suggestion=suggestion.text if suggestion else None,
                suggestion_entropy=suggestion.mean_entropy if suggestion else None,
                hints=labels.get(caption.clip_id, []),
                cider=cider,
                thresholds=thresholds,
            )
            for finding in findings:
                evidence = {"kind": finding.kind, **finding.evidence}
                if finding.kind == "model" and run is not None:
                    evidence["run"] = run.pk
                flag_create(caption=caption, reason=finding.reason, evidence=evidence)
            FlagCheck.objects.create(
                caption=caption,
                batch_id=caption.assignment.hit.batch_id if caption.assignment else None,
                kinds=[f.kind for f in findings],
            )
            flagged += bool(findings)
    return {"checked": len(todo), "flagged": flagged}


def assignment_flag_job(*, job: Job, progress: ProgressFn, assignment_id: int) -> dict[str, Any]:
    assignment = Assignment.objects.select_related("hit__batch__project").get(pk=assignment_id)
    progress(0, 1, "checking captions")
    return captions_flag(
        captions=Caption.objects.filter(assignment=assignment),
        project=assignment.hit.batch.project,
    )


def batch_flag_job(*, job: Job, progress: ProgressFn, batch_id: int) -> dict[str, Any]:
    batch = Batch.objects.select_related("project").get(pk=batch_id)
    progress(0, 1, "checking captions")
    return captions_flag(
        captions=Caption.objects.filter(assignment__hit__batch=batch), project=batch.project
    )


def flags_sweep() -> list[Job]:
    """Queues one batch_flag job per batch holding submitted or approved captions that no
    check has looked at yet, unless one is queued or running for that batch already.
    The periodic task runs this every ACTIVE_FLAG_SWEEP_SECONDS: one job per batch and
    minute rather than one per submit, because each check loads the promoted run's
    suggestions and builds CIDEr-D's document frequencies, which a batch shares."""
    pending = (
        Caption.objects.filter(
            flag_check__isnull=True,
            assignment__state__in=[Assignment.State.SUBMITTED, Assignment.State.APPROVED],
        )
        .values_list("assignment__hit__batch_id", flat=True)
        .distinct()
    )
    busy = {
        params.get("batch_id")
        for params in Job.objects.filter(
            kind="batch_flag", state__in=[Job.State.QUEUED, Job.State.RUNNING]
        ).values_list("params", flat=True)
    }
    jobs = []
    for batch in Batch.objects.filter(pk__in=list(pending)).select_related("project"):
        if batch.pk in busy:
            continue
        jobs.append(
            job_enqueue(
                kind="batch_flag",
                params={"batch_id": batch.pk},
                project=batch.project,
                label=f"Check new captions of {batch.name}",
            )
        )
    return jobs


def batch_flag_rate(*, batch: Batch) -> dict[str, Any]:
    """Captions checked and flagged in the batch, the rate, and how often each check fired."""
    from active.models import FlagCheck

    checks = list(FlagCheck.objects.filter(batch=batch).values_list("kinds", flat=True))
    flagged = sum(1 for kinds in checks if kinds)
    by_kind: dict[str, int] = defaultdict(int)
    for kinds in checks:
        for kind in kinds:
            by_kind[kind] += 1
    return {
        "checked": len(checks),
        "flagged": flagged,
        "rate": flagged / len(checks) if checks else None,
        "by_kind": dict(sorted(by_kind.items())),
    }


# Pre-suggestions -------------------------------------------------------------------------


def presuggested_texts(*, assignment: Assignment) -> dict[int, str]:
    """Texts the caption boxes start from: in an edit-mode batch, the promoted run's
    suggestion for each clip, fixed at first sight (Presuggestion). A blind batch reads no
    suggestion at all, so nothing of the model can reach the page."""
    batch = assignment.hit.batch
    config = BatchConfig.objects.filter(batch=batch).first()
    if config is None or config.presuggest != Presuggest.EDIT:
        return {}
    shown = {p.clip_id: p.text for p in Presuggestion.objects.filter(assignment=assignment)}
    if assignment.state != Assignment.State.ACCEPTED:
        return shown
    clip_ids = list(HitClip.objects.filter(hit=assignment.hit_id).values_list("clip_id", flat=True))
    missing = [c for c in clip_ids if c not in shown]
    run = promoted_run(batch.project)
    if missing and run is not None:
        for suggestion in Suggestion.objects.filter(run=run, clip_id__in=missing):
            made, _ = Presuggestion.objects.get_or_create(
                assignment=assignment,
                clip_id=suggestion.clip_id,
                defaults={"suggestion": suggestion, "text": suggestion.text},
            )
            shown[made.clip_id] = made.text
    return shown


def caption_edits_record(*, assignment: Assignment) -> list[CaptionEdit]:
    """Stores, for each caption that started from a suggestion, its edit distance to it."""
    shown = {p.clip_id: p.text for p in Presuggestion.objects.filter(assignment=assignment)}
    if not shown:
        return []
    edits = []
    for caption in Caption.objects.filter(assignment=assignment, clip_id__in=list(shown)):
        suggested = shown[caption.clip_id]
        edits.append(
            CaptionEdit(
                caption=caption,
                suggested_text=suggested,
                char_distance=scoring.edit_distance(suggested, caption.text),
                word_distance=scoring.edit_distance(
                    scoring.tokens(suggested), scoring.tokens(caption.text)
                ),
            )
        )
    return CaptionEdit.objects.bulk_create(edits, ignore_conflicts=True)


def assignment_submitted(*, assignment: Assignment) -> None:
    """annotation.services.assignment_submit calls this inside its transaction: the edit
    distances now; with ACTIVE_FLAG_ON_SUBMIT, the disagreement checks on the text queue
    once it commits (otherwise flags_sweep picks the captions up within a minute)."""
    caption_edits_record(assignment=assignment)
    if settings.ACTIVE_FLAG_ON_SUBMIT:
        job_enqueue(
            kind="captions_flag",
            params={"assignment_id": assignment.pk},
            project=assignment.hit.batch.project,
            label=f"Check captions of assignment #{assignment.pk}",
        )


def suggestions_for_review(clip_ids: Iterable[int], project: Project) -> dict[int, Suggestion]:
    """The promoted run's suggestion per clip, for reviewers (one query)."""
    run = promoted_run(project)
    if run is None:
        return {}
    return {s.clip_id: s for s in Suggestion.objects.filter(run=run, clip_id__in=list(clip_ids))}


# Promotion -------------------------------------------------------------------------------


def _val_fingerprint(snapshot: Snapshot) -> str:
    """What the validation split holds (clips and caption texts) as a digest: two runs
    are compared on their stored validation scores only when it is the same."""
    from modeling import datasets

    splits = datasets.snapshot_splits(snapshot)
    data = splits.get("val") or splits.get("test")
    digest = hashlib.sha256()
    for clip in sorted(data.clips if data else [], key=lambda c: c.clip_id):
        digest.update(f"{clip.clip_id}\t{sorted(clip.texts)}\n".encode())
    return digest.hexdigest()


def validation_score(*, run: TrainingRun, snapshot: Snapshot) -> float:
    """The run's validation CIDEr-D (beam 3) on `snapshot`'s validation split: the stored
    score when it was measured on that same split, else the run's checkpoint re-scored."""
    stored = run.score("val", METRIC)
    if stored is not None and (
        run.snapshot_id == snapshot.pk
        or _val_fingerprint(run.snapshot) == _val_fingerprint(snapshot)
    ):
        return float(stored)
    return _rescore(run, snapshot)


def _rescore(run: TrainingRun, snapshot: Snapshot) -> float:
    import tempfile
    from pathlib import Path

    from modeling import datasets
    from modeling.ml.checkpoint import load_checkpoint
    from modeling.ml.trainer import pick_device
    from modeling.services import _configs, _copy_from_storage, _score_split

    run_config, feature_config = _configs(run)
    device = pick_device(run_config.train.device)
    own = datasets.snapshot_splits(run.snapshot)
    target = datasets.snapshot_splits(snapshot)
    data = target.get("val") or target.get("test")
    if data is None or not data.clips:
        raise ValidationError(f"Snapshot v{snapshot.version} has no validation split.")
    datasets.attach_features(own, feature_config)
    datasets.attach_features(target, feature_config)
    with tempfile.TemporaryDirectory(prefix="earmark-rescore-") as tmp:
        local = Path(tmp) / "model.pt"
        if not _copy_from_storage(run.checkpoint, local):
            raise ValidationError(f"Run #{run.pk}'s checkpoint is missing from storage.")
        checkpoint = load_checkpoint(local, map_location=device)
    model, vocab = checkpoint.model.to(device), checkpoint.vocab
    attributes: dict[int, list[int]] = {}
    phrases = None
    if getattr(run_config.model, "aligned_attention", False):
        merged = {**own, "val": data}
        phrases = datasets.attribute_words(
            merged,
            source=getattr(run_config.model, "attribute_source", "retrieval"),
            names=datasets.label_names(merged),
        )
        attributes = {cid: vocab.encode_words(w, limit=16) for cid, w in phrases.items()}
    model.prepare(datasets.caption_items(own["train"], vocab, attributes=phrases))
    scored = _score_split(
        model, vocab, data, metrics=("cider",), attributes=attributes, beam_size=3
    )
    return float(scored.scores[METRIC] or 0.0)


def run_promote_if_better(
    *, run: TrainingRun, retrain: Retrain | None = None, min_gain: float = 0.0
) -> PromotionDecision:
    """Promotes `run` only if it beats the project's current suggesting run on the same
    validation split (the run's snapshot's) by more than `min_gain` CIDEr-D; logs the
    decision either way."""
    from modeling.services import run_promote

    project = run.project
    incumbent = promoted_run(project)
    decision = PromotionDecision(
        project=project, run=run, incumbent=incumbent, retrain=retrain, split_snapshot=run.snapshot
    )
    if run.state != TrainingRun.State.SUCCEEDED:
        decision.promoted = False
        decision.reason = f"Run #{run.pk} is {run.state}; only a finished run can be promoted."
    else:
        decision.run_score = validation_score(run=run, snapshot=run.snapshot)
        if incumbent is None:
            decision.promoted = True
            decision.reason = "No run suggested captions yet."
        elif incumbent.pk == run.pk:
            decision.promoted = False
            decision.reason = "This run already suggests captions."
        else:
            decision.incumbent_score = validation_score(run=incumbent, snapshot=run.snapshot)
            gain = decision.run_score - decision.incumbent_score
            decision.promoted = gain > min_gain
            verb = "beats" if decision.promoted else "does not beat"
            decision.reason = (
                f"Validation {METRIC} {decision.run_score:.4f} {verb} run #{incumbent.pk}'s "
                f"{decision.incumbent_score:.4f} on snapshot v{run.snapshot.version}'s "
                f"validation split (gain {gain:+.4f}, needed > {min_gain:g})."
            )
    with transaction.atomic():
        if decision.promoted:
            run_promote(run=run)
        decision.save()
    return decision


# Retraining ------------------------------------------------------------------------------


def approved_caption_count(project: Project) -> int:
    from corpus.queries import approved_captions

    return sum(approved_captions(project, split).count() for split in Split.values)


def retrain_due(*, config: ProjectConfig, approved: int, now: datetime) -> tuple[bool, str]:
    """Whether the corpus grew enough since the last retrain, and why (or why not)."""
    growth = approved - config.baseline_captions
    wait = timedelta(seconds=settings.ACTIVE_RETRAIN_DEBOUNCE_SECONDS)
    if config.last_retrain_at and now - config.last_retrain_at < wait:
        return False, f"last retrain {now - config.last_retrain_at} ago (debounce {wait})"
    if growth <= 0:
        return False, "no new approved captions"
    percent = 100.0 * growth / config.baseline_captions if config.baseline_captions else None
    if growth >= settings.ACTIVE_RETRAIN_MIN_NEW_CAPTIONS:
        return (
            True,
            f"{growth} new approved captions (≥ {settings.ACTIVE_RETRAIN_MIN_NEW_CAPTIONS})",
        )
    if percent is not None and percent >= settings.ACTIVE_RETRAIN_MIN_GROWTH_PERCENT:
        return True, (
            f"the corpus grew {percent:.1f}% ({config.baseline_captions} → {approved}, "
            f"≥ {settings.ACTIVE_RETRAIN_MIN_GROWTH_PERCENT:g}%)"
        )
    return False, f"{growth} new approved captions, not enough yet"


def _in_flight(project: Project) -> Retrain | None:
    return (
        Retrain.objects.filter(
            project=project, job__state__in=[Job.State.QUEUED, Job.State.RUNNING]
        )
        .order_by("-created_at")
        .first()
    )


def retrain_start(
    *,
    project: Project,
    trigger: str,
    reason: str,
    user: Any = None,
    now: datetime | None = None,
    debounce: bool = True,
) -> Retrain:
    """Queues a retrain of the project's configured model (snapshot, train, promote if
    better) on the gpu queue. While one is queued or running, that one is returned instead
    of a second; with `debounce`, so is the last one when it started less than
    ACTIVE_RETRAIN_DEBOUNCE_SECONDS ago."""
    now = now or timezone.now()
    wait = timedelta(seconds=settings.ACTIVE_RETRAIN_DEBOUNCE_SECONDS)
    with transaction.atomic():
        config = ProjectConfig.objects.select_for_update().get(
            pk=project_config(project=project).pk
        )
        running = _in_flight(project)
        if running is not None:
            return running
        last = Retrain.objects.filter(project=project).order_by("-created_at", "-pk").first()
        if debounce and last is not None and now - last.created_at < wait:
            return last
        approved = approved_caption_count(project)
        retrain = Retrain.objects.create(
            project=project,
            trigger=trigger,
            reason=reason,
            approved_captions=approved,
            created_at=now,
        )
        retrain.job = job_enqueue(
            kind="active_retrain",
            params={"retrain_id": retrain.pk},
            project=project,
            created_by=user,
            label=f"Retrain {config.model_name} ({retrain.get_trigger_display().lower()})",
        )
        retrain.save(update_fields=["job"])
        config.baseline_captions, config.last_retrain_at = approved, now
        config.save(update_fields=["baseline_captions", "last_retrain_at"])
    return retrain


def retrain_watch(*, now: datetime | None = None) -> list[Retrain]:
    """The beat task: starts a retrain for each project with auto-retrain on whose corpus
    grew by ACTIVE_RETRAIN_MIN_NEW_CAPTIONS or ACTIVE_RETRAIN_MIN_GROWTH_PERCENT since the
    last one, at most once per ACTIVE_RETRAIN_DEBOUNCE_SECONDS."""
    now = now or timezone.now()
    started = []
    for config in ProjectConfig.objects.filter(auto_retrain=True).select_related("project"):
        approved = approved_caption_count(config.project)
        due, why = retrain_due(config=config, approved=approved, now=now)
        if due and _in_flight(config.project) is None:
            started.append(
                retrain_start(
                    project=config.project, trigger=Retrain.Trigger.GROWTH, reason=why, now=now
                )
            )
    return started


def retrain_execute(
    *, retrain: Retrain, progress: ProgressFn = _no_progress, job: Job | None = None
) -> PromotionDecision:
    """Snapshots the approved captions (JSON lines), trains the configured model on them,
    promotes the run only if it is better, and after a promotion re-ranks the open
    batches and queues suggestions for the project's clips."""
    from corpus.queries import approved_captions
    from corpus.services import snapshot_build, snapshot_create
    from modeling.services import run_execute, run_start

    project = retrain.project
    config = project_config(project=project)
    splits = [s for s in Split.values if approved_captions(project, s).exists()]
    if "train" not in splits or not ({"val", "test"} & set(splits)):
        raise ValidationError(
            "Retraining needs approved captions in the train split and in val or test "
            f"(found: {', '.join(splits) or 'none'})."
        )
    progress(0, 1, "snapshot")
    snapshot = snapshot_create(project=project, fmt="jsonl", text="raw", splits=splits)
    snapshot = snapshot_build(snapshot=snapshot)
    Retrain.objects.filter(pk=retrain.pk).update(snapshot=snapshot)
    run = run_start(
        project=project,
        model_name=config.model_name,
        snapshot=snapshot,
        created_by=None,
        preset=config.preset,
        overrides=config.overrides,
        enqueue=False,
    )
    Retrain.objects.filter(pk=retrain.pk).update(run=run)
    run = run_execute(run=run, progress=progress, job=job)
    retrain.refresh_from_db()
    decision = run_promote_if_better(run=run, retrain=retrain)
    if decision.run_score is not None:
        CurvePoint.objects.create(
            project=project,
            source=CurvePoint.Source.LIVE,
            strategy="mixed",
            captions=snapshot.counts.get("train", {}).get("captions", retrain.approved_captions),
            value=decision.run_score,
            run=run,
        )
    if decision.promoted:
        job_enqueue(
            kind="active_suggest",
            params={"run_id": run.pk},
            project=project,
            label=f"Suggest captions with promoted run #{run.pk} and re-rank open batches",
        )
    return decision


def retrain_execute_job(*, job: Job, progress: ProgressFn, retrain_id: int) -> dict[str, Any]:
    retrain = Retrain.objects.select_related("project").get(pk=retrain_id)
    decision = retrain_execute(retrain=retrain, progress=progress, job=job)
    return {
        "retrain": retrain.pk,
        "run": decision.run_id,
        "promoted": decision.promoted,
        "run_score": decision.run_score,
        "incumbent_score": decision.incumbent_score,
        "reason": decision.reason,
    }


def project_suggest(
    *, run: TrainingRun, beam_size: int = 3, progress: ProgressFn = _no_progress
) -> dict[str, Any]:
    """After a promotion: the run suggests captions for every ready clip of the project
    (captioned or not, so suggestions can be compared with people's), then the open
    batches are re-ranked with them."""
    from modeling.services import clips_caption

    clip_ids = list(
        Clip.objects.filter(subsets__project=run.project, status=Clip.Status.READY)
        .exclude(audio="")
        .values_list("pk", flat=True)
        .distinct()
    )
    result = clips_caption(run=run, clip_ids=clip_ids, beam_size=beam_size, progress=progress)
    result["batches_ranked"] = batches_rank(project=run.project)
    return result


def project_suggest_job(
    *, job: Job, progress: ProgressFn, run_id: int, beam_size: int = 3
) -> dict[str, Any]:
    run = TrainingRun.objects.select_related("project").get(pk=run_id)
    return project_suggest(run=run, beam_size=beam_size, progress=progress)


# Learning curves -------------------------------------------------------------------------


def curve_series(*, project: Project) -> list[dict[str, Any]]:
    """The project's learning-curve points grouped into series (source, label, strategy),
    each a list of {captions, value, round, run} in caption order."""
    series: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in CurvePoint.objects.filter(project=project).order_by("captions", "pk"):
        series[(p.source, p.label, p.strategy)].append(
            {"captions": p.captions, "value": p.value, "round": p.round, "run": p.run_id,
             "metric": p.metric}
        )  # fmt: skip
    return [
        {"source": source, "label": label, "strategy": strategy, "points": points}
        for (source, label, strategy), points in sorted(series.items())
    ]


def curve_import(*, project: Project, user: Any, data: dict[str, Any]) -> int:
    """Imports a simulation's curves (benchmarks/active_learning.py --json) as points:
    {"label": str, "metric": "CIDEr-D", "curves": {strategy: [{"round", "captions",
    "value"}, …]}}. Replaces earlier points of the same label; nothing is written when a
    point is malformed. `user` None is a trusted caller (the management command)."""
    if user is not None:
        require_role(project, user, Role.RESEARCHER)
    label = str(data.get("label") or "").strip()[:200]
    curves = data.get("curves")
    if not label or not isinstance(curves, dict) or not curves:
        raise ValidationError('Expected {"label": …, "curves": {strategy: [points]}}.')
    rows = []
    for strategy, points in curves.items():
        if strategy not in Strategy.values:
            raise ValidationError(f"Unknown strategy {strategy!r} in curves.")
        if not isinstance(points, list):
            raise ValidationError(f"curves[{strategy!r}] is not a list of points.")
        for i, point in enumerate(points):
            try:
                captions, value = int(point["captions"]), float(point["value"])
                number = int(point.get("round", i))
            except (KeyError, TypeError, ValueError):
                raise ValidationError(
                    f"curves[{strategy!r}][{i}] needs integer captions and a numeric value."
                ) from None
            if captions < 0 or number < 0:
                raise ValidationError(f"curves[{strategy!r}][{i}] has a negative number.")
            rows.append(
                CurvePoint(
                    project=project,
                    source=CurvePoint.Source.SIMULATION,
                    strategy=strategy,
                    label=label,
                    round=number,
                    captions=captions,
                    metric=str(data.get("metric") or METRIC)[:20],
                    value=value,
                )
            )
    with transaction.atomic():
        CurvePoint.objects.filter(
            project=project, source=CurvePoint.Source.SIMULATION, label=label
        ).delete()
        CurvePoint.objects.bulk_create(rows)
    return len(rows)


def edit_stats(*, batch: Batch) -> dict[str, Any]:
    edits = CaptionEdit.objects.filter(caption__assignment__hit__batch=batch)
    n = edits.count()
    if not n:
        return {"captions": 0}
    rows = list(edits.values_list("word_distance", "char_distance"))
    return {
        "captions": n,
        "unchanged": sum(1 for w, c in rows if c == 0),
        "mean_word_distance": sum(w for w, _ in rows) / n,
        "mean_char_distance": sum(c for _, c in rows) / n,
    }


def flagged_counts(batch: Batch) -> dict[str, int]:
    from crowd.models import Flag

    return dict(
        Flag.objects.filter(caption__assignment__hit__batch=batch)
        .values_list("reason")
        .annotate(n=Count("id"))
        .values_list("reason", "n")
    )
