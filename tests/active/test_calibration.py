"""Flags that learn from review: reviewers' decisions refit a project's flag probabilities
(active/services/calibration.py) and measure the flags' precision and recall."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from active.flagmodel import Calibration
from active.models import FlagCalibration, FlagCheck
from active.services.calibration import (
    fit_calibration,
    flags_calibrate,
    flags_calibrate_sweep,
    project_calibration,
)
from annotation.models import Assignment, Batch, Caption
from core.models import Job
from core.services import job_run
from crowd.models import Flag, Review
from curation.models import Clip
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def _reviewer() -> Any:
    return get_user_model().objects.get_or_create(username="reviewer")[0]


def _checked(
    batch: Batch, clip: Clip, n: int, *, score: float, flagged: bool, decision: str | None
) -> Caption:
    """A submitted caption checked by the flags with `score`, decided by a reviewer."""
    assignment = Assignment.objects.create(
        hit=batch.hits.get(hit_clips__clip=clip),
        worker=make_user(f"w{n}"),
        state=Assignment.State.SUBMITTED,
        deadline="2100-01-01T00:00Z",
        submitted_at="2000-01-02T00:00Z",
        accepted_at="2000-01-01T00:00Z",
    )
    caption = Caption.objects.create(assignment=assignment, clip=clip, text=f"caption {n}")
    FlagCheck.objects.create(
        caption=caption, batch=batch, kinds=["consensus"] if flagged else [], score=score
    )
    if flagged:
        Flag.objects.create(
            caption=caption,
            reason="Likely off-topic: shares little meaning with the other four captions; 50 %",
            evidence={"kind": "consensus", "check": "meaning", "score": score},
        )
    if decision is not None:
        Review.objects.create(assignment=assignment, decision=decision, reviewer=_reviewer())
    return caption


def _decide(batch: Batch, clip: Clip, *, flagged_are_bad: bool) -> None:
    """Twelve flagged captions (score 2) and twelve unflagged (score -3), all decided:
    the flagged ones rejected when `flagged_are_bad`, else approved (and one unflagged
    rejected, so there is a bad caption either way)."""
    bad, good = Review.Decision.REJECTED, Review.Decision.APPROVED
    for n in range(12):
        _checked(batch, clip, n, score=2.0, flagged=True, decision=bad if flagged_are_bad else good)
    for n in range(12, 24):
        _checked(batch, clip, n, score=-3.0, flagged=False, decision=bad if n == 12 else good)


def test_it_starts_from_the_detectors_own_probabilities(batch: Batch) -> None:
    assert project_calibration(batch.project) == Calibration()


def test_rejected_flagged_captions_raise_the_probability_a_flag_shows(
    batch: Batch, clips: list[Clip]
) -> None:
    _decide(batch, clips[0], flagged_are_bad=True)

    row = flags_calibrate(project=batch.project)

    after = project_calibration(batch.project)
    assert after.probability(2.0) > Calibration().probability(2.0) + 0.02
    assert (row.decisions, row.bad, row.flagged, row.flagged_bad) == (24, 13, 12, 12)
    assert row.precision == 1.0
    assert row.recall == pytest.approx(12 / 13)


def test_approved_flagged_captions_lower_the_probability_a_flag_shows(
    batch: Batch, clips: list[Clip]
) -> None:
    _decide(batch, clips[0], flagged_are_bad=False)

    row = flags_calibrate(project=batch.project)

    after = project_calibration(batch.project)
    assert after.probability(2.0) < Calibration().probability(2.0) - 0.2
    assert row.precision == 0.0


def test_a_flag_waiting_for_review_shows_the_refit_probability(
    batch: Batch, clips: list[Clip]
) -> None:
    _decide(batch, clips[0], flagged_are_bad=False)
    waiting = _checked(batch, clips[1], 99, score=2.0, flagged=True, decision=None)

    flags_calibrate(project=batch.project)

    flag = Flag.objects.get(caption=waiting)
    probability = project_calibration(batch.project).probability(2.0)
    assert flag.evidence["probability"] == round(probability, 3)
    assert flag.reason == (
        "Likely off-topic: shares little meaning with the other four captions; "
        f"{round(100 * probability)} %"
    )


def test_automatic_approvals_are_no_decision(batch: Batch, clips: list[Clip]) -> None:
    caption = _checked(batch, clips[0], 1, score=2.0, flagged=True, decision=None)
    assert caption.assignment is not None
    Review.objects.create(
        assignment=caption.assignment, decision=Review.Decision.APPROVED, automatic=True
    )

    row = flags_calibrate(project=batch.project)

    assert row.decisions == 0
    assert project_calibration(batch.project) == Calibration(row.slope, row.intercept)
    assert (row.slope, row.intercept) == (1.0, 0.0)


def test_a_few_decisions_nudge_the_fit_and_many_decide_it() -> None:
    few = fit_calibration([2.0] * 2, [False] * 2)
    many = fit_calibration([2.0] * 200, [False] * 200)
    default = Calibration().probability(2.0)
    assert many.probability(2.0) < few.probability(2.0) < default


def test_the_sweep_queues_a_refit_where_reviewers_decided_since_the_last(
    batch: Batch, clips: list[Clip], settings: Any
) -> None:
    settings.ACTIVE_FLAG_CALIBRATE_SECONDS = 3600
    _decide(batch, clips[0], flagged_are_bad=True)

    (job,) = flags_calibrate_sweep()
    assert job.kind == "flags_calibrate"
    assert flags_calibrate_sweep() == []  # one queued already

    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED
    assert FlagCalibration.objects.filter(project=batch.project).count() == 1
    assert flags_calibrate_sweep() == []  # nothing decided since
