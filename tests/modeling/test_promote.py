"""One promotion path (modeling.services.run_promote) for the runs page, the API and a
retrain: a run switches only once its suggestions exist, so Label Studio never stores the
empty predictions of a run with none (issue 32, Why 5)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.models import Job, Project
from core.services import api_token_create
from corpus.models import Snapshot
from curation.models import Clip
from modeling.models import Suggestion, TrainingRun
from modeling.services import run_promote, run_promotion_finish
from tests.annotation.factories import make_clips, make_subset
from tests.conftest import login
from tests.modeling.factories import make_run, ready_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def snapshot(project: Project) -> Snapshot:
    return ready_snapshot(project)


@pytest.fixture
def ready_clips(project: Project) -> list[Clip]:
    clips = make_clips(2)
    Clip.objects.filter(pk__in=[c.pk for c in clips]).update(
        status=Clip.Status.READY, audio="clips/audio/x.wav"
    )
    make_subset(project, clips)
    return clips


def _suggest(run: TrainingRun, clips: list[Clip]) -> None:
    Suggestion.objects.bulk_create(
        Suggestion(
            run=run, clip=clip, text="a dog barks", log_prob=-1.0, mean_entropy=0.5, beam_size=1
        )
        for clip in clips
    )


def test_the_runs_page_waits_for_the_runs_suggestions(
    project: Project, snapshot: Snapshot, ready_clips: list[Clip], alice: Any
) -> None:
    old = make_run(project, snapshot, promoted_at=timezone.now())
    new = make_run(project, snapshot)
    response = login(alice).post(reverse("run_promote", args=[project.slug, new.pk]), follow=True)
    new.refresh_from_db()
    assert new.promoted_at is None  # Label Studio still reads the old run
    assert TrainingRun.objects.get(promoted_at__isnull=False) == old
    assert "once its suggestions for 2 clip(s) are made" in response.content.decode()
    job = Job.objects.get(kind="active_suggest")
    assert job.params == {"run_id": new.pk, "promote": True}
    _suggest(new, ready_clips)
    assert run_promotion_finish(run=new)
    new.refresh_from_db()
    assert new.promoted_at is not None


def test_the_api_promotes_through_the_same_path(
    project: Project, snapshot: Snapshot, ready_clips: list[Clip], alice: Any
) -> None:
    run = make_run(project, snapshot)
    raw = api_token_create(user=alice, name="s")[1]
    response = Client().post(
        f"/api/projects/{project.slug}/runs/{run.pk}/promote",
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert response.status_code == 200
    assert response.json()["promoted"] is False
    assert Job.objects.get(kind="active_suggest").params["promote"] is True


def test_a_run_with_every_suggestion_switches_at_once(
    project: Project, snapshot: Snapshot, ready_clips: list[Clip]
) -> None:
    run = make_run(project, snapshot)
    _suggest(run, ready_clips)
    promotion = run_promote(run=run)
    assert promotion.switched
    run.refresh_from_db()
    assert run.promoted_at is not None


def test_a_run_switched_to_since_wins_over_a_waiting_promotion(
    project: Project, snapshot: Snapshot, ready_clips: list[Clip]
) -> None:
    waiting = make_run(project, snapshot)
    assert not run_promote(run=waiting).switched
    ready = make_run(project, snapshot)
    _suggest(ready, ready_clips)
    assert run_promote(run=ready).switched
    _suggest(waiting, ready_clips)
    assert not run_promotion_finish(run=waiting)
    assert TrainingRun.objects.get(promoted_at__isnull=False) == ready
