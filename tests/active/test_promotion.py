"""Promotion only if better (both scored on the same validation split), every decision
logged; auto-retrain watches approved-caption growth, debounced."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from active.models import ProjectConfig, PromotionDecision, Retrain
from active.services.config import project_config
from active.services.ranking import promoted_run
from active.services.retraining import (
    retrain_due,
    retrain_start,
    retrain_watch,
    run_promote_if_better,
)
from active.services.suggestions import project_suggest
from annotation.models import Batch
from core.models import Job, Project
from corpus.models import Snapshot
from curation.models import Clip
from modeling.models import Suggestion, TrainingRun
from tests.modeling.factories import make_run

pytestmark = pytest.mark.django_db


def _run(project: Project, snapshot: Snapshot, cider: float, **fields: Any) -> TrainingRun:
    return make_run(project, snapshot, metrics={"val": {"CIDEr-D": cider}}, **fields)


def test_the_first_finished_run_is_promoted(project: Project, snapshot: Snapshot) -> None:
    run = _run(project, snapshot, 0.3)
    decision = run_promote_if_better(run=run)
    run.refresh_from_db()
    assert decision.promoted
    assert run.promoted_at is not None
    assert decision.reason == "No run suggested captions yet."


def test_a_better_run_replaces_the_current_one(project: Project, snapshot: Snapshot) -> None:
    old = _run(project, snapshot, 0.3, promoted_at=timezone.now())
    new = _run(project, snapshot, 0.45)

    decision = run_promote_if_better(run=new)

    old.refresh_from_db()
    new.refresh_from_db()
    assert decision.promoted
    assert (decision.run_score, decision.incumbent_score) == (0.45, 0.3)
    assert new.promoted_at is not None
    assert old.promoted_at is None
    assert "beats run #" in decision.reason


def test_a_worse_or_equal_run_is_kept_out_and_the_decision_logged(
    project: Project, snapshot: Snapshot
) -> None:
    old = _run(project, snapshot, 0.3, promoted_at=timezone.now())
    for cider in (0.25, 0.3):
        new = _run(project, snapshot, cider)
        decision = run_promote_if_better(run=new)
        new.refresh_from_db()
        assert not decision.promoted
        assert new.promoted_at is None
        assert "does not beat" in decision.reason
    old.refresh_from_db()
    assert old.promoted_at is not None
    assert PromotionDecision.objects.filter(project=project, promoted=False).count() == 2


def test_an_unfinished_run_is_never_promoted(project: Project, snapshot: Snapshot) -> None:
    run = make_run(project, snapshot, state=TrainingRun.State.FAILED, checkpoint="")
    decision = run_promote_if_better(run=run)
    assert not decision.promoted
    assert decision.reason == f"Run #{run.pk} is failed; only a finished run can be promoted."


def test_runs_on_different_validation_splits_are_rescored(
    project: Project, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The incumbent's stored score is for another split: it is scored again on the
    candidate's (the checkpoint re-scoring itself is exercised by the integration path)."""
    from active.services import retraining

    other = Snapshot.objects.create(
        project=project, version=2, format="jsonl", splits=["train", "val"], state="ready",
        archive="snapshots/v2.zip", archive_sha256="1" * 64, finished_at=timezone.now(),
    )  # fmt: skip
    old = _run(project, snapshot, 0.9, promoted_at=timezone.now())
    new = _run(project, other, 0.5)
    monkeypatch.setattr(retraining, "_val_fingerprint", lambda snap: f"split-of-v{snap.version}")
    rescored: list[tuple[int, int]] = []

    def rescore(run: TrainingRun, snap: Snapshot) -> float:
        rescored.append((run.pk, snap.pk))
        return 0.4

    monkeypatch.setattr(retraining, "_rescore", rescore)
    decision = run_promote_if_better(run=new)
    assert rescored == [(old.pk, other.pk)]
    assert decision.promoted
    assert decision.incumbent_score == 0.4


def _config(project: Project, **fields: Any) -> ProjectConfig:
    config = project_config(project=project)
    for name, value in fields.items():
        setattr(config, name, value)
    config.save()
    return config


def test_growth_is_due_after_n_new_captions_or_x_percent(project: Project, settings: Any) -> None:
    settings.ACTIVE_RETRAIN_MIN_NEW_CAPTIONS = 100
    settings.ACTIVE_RETRAIN_MIN_GROWTH_PERCENT = 20.0
    settings.ACTIVE_RETRAIN_DEBOUNCE_SECONDS = 3600
    now = timezone.now()
    config = _config(project, baseline_captions=1000, auto_retrain=True)
    assert retrain_due(config=config, approved=1100, now=now)[0]  # N new
    config = _config(project, baseline_captions=200)
    assert retrain_due(config=config, approved=250, now=now)[0]  # 25 %
    assert not retrain_due(config=config, approved=230, now=now)[0]  # 30 new, 15 %
    config = _config(project, baseline_captions=200, last_retrain_at=now - timedelta(minutes=5))
    due, why = retrain_due(config=config, approved=500, now=now)
    assert not due
    assert "debounce" in why


def test_growth_is_never_due_while_retraining_on_growth_is_off(project: Project) -> None:
    config = _config(project, baseline_captions=10, auto_retrain=False)
    due, why = retrain_due(config=config, approved=10_000, now=timezone.now())
    assert not due
    assert why == "retraining when the corpus grows is switched off for this project"


def test_the_watch_starts_one_retrain_and_debounces(project: Project, settings: Any) -> None:
    settings.ACTIVE_RETRAIN_MIN_NEW_CAPTIONS = 1
    _config(project, auto_retrain=True, baseline_captions=0)
    from annotation.models import Caption
    from corpus.models import CorpusImport
    from tests.annotation.factories import make_clips, make_subset

    subset = make_subset(project, make_clips(2), "train")
    CorpusImport.objects.create(
        project=project, subset=subset, format="audiocaps", split="train", file_name="x.csv",
        sha256="0" * 64, rows=2, clips_created=2, captions_created=2, captions_existing=0,
    )  # fmt: skip
    for clip in subset.clips.all():
        Caption.objects.create(clip=clip, text="a dog barks", provenance="imported",
                               imported_into=project, external_id=str(clip.pk))  # fmt: skip

    started = retrain_watch()

    assert len(started) == 1
    retrain = started[0]
    assert retrain.trigger == Retrain.Trigger.GROWTH
    assert retrain.approved_captions == 2
    assert retrain.job is not None
    assert retrain.job.kind == "active_retrain"
    assert retrain.job.state == Job.State.QUEUED
    assert retrain_watch() == []  # queued: no second one
    config = ProjectConfig.objects.get(project=project)
    assert config.baseline_captions == 2


def test_a_start_inside_the_debounce_window_returns_the_last_retrain(
    project: Project, settings: Any
) -> None:
    settings.ACTIVE_RETRAIN_DEBOUNCE_SECONDS = 3600
    first = retrain_start(project=project, trigger="label_studio", reason="one")
    assert first.job_id is not None
    Job.objects.filter(pk=first.job_id).update(
        state=Job.State.SUCCEEDED, finished_at=timezone.now()
    )
    again = retrain_start(project=project, trigger="label_studio", reason="two")
    assert again == first
    forced = retrain_start(project=project, trigger="manual", reason="three", debounce=False)
    assert forced != first


def _fake_captioner(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """Replaces the GPU captioning with stored suggestions; records the clips asked for."""
    import modeling.suggestions
    from tests.active.conftest import suggest

    asked: list[list[int]] = []

    def clips_caption(*, run: TrainingRun, clip_ids: list[int], **_: Any) -> dict[str, Any]:
        asked.append(sorted(clip_ids))
        for clip in Clip.objects.filter(pk__in=clip_ids):
            suggest(run, clip, f"run {run.pk} hears clip {clip.pk}")
        return {"run": run.pk, "clips": len(clip_ids), "suggestions": len(clip_ids)}

    monkeypatch.setattr(modeling.suggestions, "clips_caption", clips_caption)
    return asked


def test_a_run_without_suggestions_suggests_before_it_is_promoted(
    batch: Batch, clips: list[Clip], snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = batch.project
    old = _run(project, snapshot, 0.3, promoted_at=timezone.now())
    new = _run(project, snapshot, 0.45)

    decision = run_promote_if_better(run=new)

    assert decision.promoted
    assert promoted_run(project) == old  # annotators and Label Studio still read the old run
    assert "once its suggestions for 4 clip(s) are made" in decision.reason
    job = Job.objects.get(kind="active_suggest")
    assert job.params == {"run_id": new.pk, "promote": True}

    asked = _fake_captioner(monkeypatch)
    result = project_suggest(run=new, promote=True)
    assert asked == [sorted(c.pk for c in clips)]
    assert result["promoted"]
    assert promoted_run(project) == new
    assert Suggestion.objects.filter(run=new).count() == 4


def test_a_run_with_all_its_suggestions_is_promoted_at_once(
    batch: Batch, clips: list[Clip], snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _run(batch.project, snapshot, 0.3, promoted_at=timezone.now())
    new = _run(batch.project, snapshot, 0.45)
    _fake_captioner(monkeypatch)
    project_suggest(run=new)  # suggested before, e.g. for a look at its captions

    run_promote_if_better(run=new)

    assert promoted_run(batch.project) == new
    assert old.pk != new.pk
    assert Job.objects.get(kind="active_suggest").params == {"run_id": new.pk, "promote": False}


def test_a_later_decision_overrides_a_promotion_waiting_for_suggestions(
    batch: Batch, clips: list[Clip], snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _run(batch.project, snapshot, 0.3, promoted_at=timezone.now())
    waiting = _run(batch.project, snapshot, 0.45)
    assert run_promote_if_better(run=waiting).promoted
    later = _run(batch.project, snapshot, 0.5)
    assert run_promote_if_better(run=later).promoted
    _fake_captioner(monkeypatch)

    assert not project_suggest(run=waiting, promote=True)["promoted"]
    assert promoted_run(batch.project) == old
    assert project_suggest(run=later, promote=True)["promoted"]
    assert promoted_run(batch.project) == later
