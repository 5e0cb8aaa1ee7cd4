"""Retraining and promotion: a retrain snapshots the approved captions, trains the
project's configured model and promotes the run only if it beats the incumbent on the same
validation split, logging the decision either way; the beat task starts one when the
corpus has grown enough. torch is imported only inside the functions that train or score
a model."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from active.models import CurvePoint, ProjectConfig, PromotionDecision, Retrain
from active.services.config import project_config
from active.services.ranking import promoted_run
from core.models import Job, Project
from core.progress import ProgressFn, no_progress
from core.services import job_enqueue
from corpus.models import Snapshot
from curation.models import Split
from modeling.models import TrainingRun

METRIC = "CIDEr-D"  # what promotion compares and the learning curve plots


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
    """The run's checkpoint scored (CIDEr-D, beam 3) on `snapshot`'s validation split."""
    from modeling.scoring import run_score_snapshot

    scored = run_score_snapshot(run=run, snapshot=snapshot, metrics=("cider",), beam_size=3)
    return float(scored.scores[METRIC] or 0.0)


def run_promote_if_better(
    *, run: TrainingRun, retrain: Retrain | None = None, min_gain: float = 0.0
) -> PromotionDecision:
    """Promotes `run` only if it beats the project's current suggesting run on the same
    validation split (the run's snapshot's) by more than `min_gain` CIDEr-D; logs the
    decision either way. A promoted run without suggestions for all the project's clips
    becomes the suggesting model once they are made (_promote_with_suggestions)."""
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
            _promote_with_suggestions(run=run, decision=decision)
        decision.save()
    return decision


def _promote_with_suggestions(*, run: TrainingRun, decision: PromotionDecision) -> None:
    """The one promotion path (modeling.services.run_promote: at once with every
    suggestion made, else at the end of the job that makes them), with its outcome told
    in the decision's reason."""
    from modeling.services import run_promote

    promotion = run_promote(run=run)
    if not promotion.switched:
        decision.reason += (
            f" It suggests captions once its suggestions for {promotion.missing:,} clip(s) "
            f"are made (job #{promotion.job.pk}); until then run "
            f"{f'#{decision.incumbent_id}' if decision.incumbent_id else 'none'} does."
        )


def approved_caption_count(project: Project) -> int:
    from corpus.queries import approved_captions

    return sum(approved_captions(project, split).count() for split in Split.values)


def retrain_due(*, config: ProjectConfig, approved: int, now: datetime) -> tuple[bool, str]:
    """Whether the corpus grew enough since the last retrain, and why (or why not); never
    while the project's "Retrain when the corpus grows" (auto_retrain) is off."""
    if not config.auto_retrain:
        return False, "retraining when the corpus grows is switched off for this project"
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
    user: User | None = None,
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
    *, retrain: Retrain, progress: ProgressFn = no_progress, job: Job | None = None
) -> PromotionDecision:
    """Snapshots the approved captions (JSON lines), trains the configured model on them
    and promotes the run only if it is better (run_promote_if_better: a promoted run
    suggests for the project's clips first, then re-ranks the open batches)."""
    from corpus.queries import approved_captions
    from corpus.services import snapshot_build, snapshot_create
    from modeling.services import run_start
    from modeling.training import run_execute

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
    run = run_execute(run=run, progress=progress, job=job).run
    retrain.refresh_from_db()
    return _retrain_decide(retrain=retrain, run=run)


def _retrain_decide(*, retrain: Retrain, run: TrainingRun) -> PromotionDecision:
    """A retrain's last step: promote its run if better, and plot its score on the
    project's learning curve."""
    decision = run_promote_if_better(run=run, retrain=retrain)
    if decision.run_score is not None:
        counts = run.snapshot.counts.get("train", {})
        CurvePoint.objects.create(
            project=run.project,
            source=CurvePoint.Source.LIVE,
            strategy="mixed",
            captions=counts.get("captions", retrain.approved_captions),
            value=decision.run_score,
            run=run,
        )
    return decision


def retrain_run_finished(*, run: TrainingRun) -> PromotionDecision | None:
    """modeling.signals.run_succeeded: a retrain's run that finished training outside its
    retrain's job (the worker running the retrain died, the run failed with it, and someone
    resumed the run) still gets the retrain's promote-if-better step, which that job never
    reached. None when the run is no retrain's or its retrain has decided already."""
    retrain = Retrain.objects.filter(run=run).first()
    if retrain is None or retrain.decisions.exists():
        return None
    return _retrain_decide(retrain=retrain, run=run)


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
