"""Flags that learn from review: each project's reviewers' approve/reject decisions refit
the probability its flags show (a logistic map of the meaning detector's score), and
measure how the flags did against those decisions (precision and recall so far), one
FlagCalibration row per refit. A job on a schedule (ACTIVE_FLAG_CALIBRATE_SECONDS) and on
demand (the project's flags page, `manage.py calibrate_flags`)."""

from __future__ import annotations

import math
from typing import Any

from django.db import transaction
from django.db.models import Q

from active.flagmodel import Calibration
from active.models import FlagCalibration, FlagCheck
from core.models import Job, Project
from core.progress import ProgressFn
from core.services import job_enqueue
from crowd.models import Flag, Review

DEFAULT = Calibration()
PRIOR = 4.0  # pseudo-decisions' weight pulling the fit toward the default calibration


def project_calibration(project: Project) -> Calibration:
    """The calibration in force: the project's latest refit, or the detector's own."""
    latest = FlagCalibration.objects.filter(project=project).order_by("-created_at", "-id").first()
    if latest is None:
        return DEFAULT
    return Calibration(slope=latest.slope, intercept=latest.intercept)


def _decided(project: Project) -> list[tuple[float | None, bool, bool]]:
    """(detector score, flagged, bad) of each checked caption of the project that a
    reviewer decided on: bad when its assignment was rejected or the reviewer corrected it.
    Automatic approvals are no one's decision and do not count."""
    rows = (
        FlagCheck.objects.filter(
            caption__assignment__hit__batch__project=project,
            caption__assignment__review__automatic=False,
        )
        .values_list(
            "score", "kinds", "caption__assignment__review__decision", "caption__fixed_text"
        )
        .order_by("pk")
    )
    return [
        (score, bool(kinds), decision == Review.Decision.REJECTED or bool(fixed))
        for score, kinds, decision, fixed in rows
    ]


def fit_calibration(
    scores: list[float], bad: list[bool], *, prior: Calibration = DEFAULT
) -> Calibration:
    """Logistic regression of bad on score (Newton's method), with a Gaussian prior of
    weight PRIOR centred on `prior`, so a handful of decisions nudge it and many decide it."""
    slope, intercept = prior.slope, prior.intercept
    for _ in range(50):
        g_s = PRIOR * (slope - prior.slope)
        g_i = PRIOR * (intercept - prior.intercept)
        h_ss = h_ii = PRIOR
        h_si = 0.0
        for x, y in zip(scores, bad, strict=True):
            z = max(-50.0, min(50.0, slope * x + intercept))
            p = 1.0 / (1.0 + math.exp(-z))
            g_s += (p - y) * x
            g_i += p - y
            w = p * (1 - p)
            h_ss += w * x * x
            h_si += w * x
            h_ii += w
        det = h_ss * h_ii - h_si * h_si
        if det <= 1e-12:
            break
        d_s = (h_ii * g_s - h_si * g_i) / det
        d_i = (h_ss * g_i - h_si * g_s) / det
        slope, intercept = slope - d_s, intercept - d_i
        if abs(d_s) + abs(d_i) < 1e-9:
            break
    return Calibration(slope=slope, intercept=intercept)


def flags_calibrate(*, project: Project) -> FlagCalibration:
    """Refits the project's calibration from its reviewers' decisions so far, records how
    the flags did against them, and rewrites the probability of its flags still waiting for
    a review."""
    decided = _decided(project)
    scored = [(s, b) for s, _, b in decided if s is not None]
    calibration = fit_calibration([s for s, _ in scored], [b for _, b in scored])
    with transaction.atomic():
        row = FlagCalibration.objects.create(
            project=project,
            slope=calibration.slope,
            intercept=calibration.intercept,
            decisions=len(decided),
            bad=sum(b for _, _, b in decided),
            flagged=sum(f for _, f, _ in decided),
            flagged_bad=sum(f and b for _, f, b in decided),
        )
        waiting = Flag.objects.filter(
            Q(caption__assignment__hit__batch__project=project),
            caption__assignment__review__isnull=True,
            evidence__check="meaning",
        )
        # lock only the flags: the review join is an outer one, which PostgreSQL cannot lock
        for flag in waiting.select_for_update(of=("self",)):
            score = flag.evidence.get("score")
            if score is None:
                continue
            probability = calibration.probability(float(score))
            flag.evidence["probability"] = round(probability, 3)
            words = flag.reason.rsplit(";", 1)[0]
            flag.reason = f"{words}; {round(100 * probability)} %"
            flag.save(update_fields=["evidence", "reason"])
    return row


def flags_calibrate_job(*, job: Job, progress: ProgressFn, project_id: int) -> dict[str, Any]:
    progress(0, 1, "refitting the flags' calibration")
    row = flags_calibrate(project=Project.objects.get(pk=project_id))
    return {
        "decisions": row.decisions,
        "slope": round(row.slope, 4),
        "intercept": round(row.intercept, 4),
        "precision": row.precision,
        "recall": row.recall,
    }


def flags_calibrate_sweep() -> list[Job]:
    """Queues a refit for each project with reviewer decisions newer than its last refit,
    unless one is queued or running already."""
    busy = {
        params.get("project_id")
        for params in Job.objects.filter(
            kind="flags_calibrate", state__in=[Job.State.QUEUED, Job.State.RUNNING]
        ).values_list("params", flat=True)
    }
    jobs = []
    for project in Project.objects.all():
        if project.pk in busy:
            continue
        latest = FlagCalibration.objects.filter(project=project).order_by("-created_at").first()
        reviews = Review.objects.filter(
            assignment__hit__batch__project=project,
            automatic=False,
            assignment__captions__flag_check__isnull=False,
        )
        if latest is not None:
            reviews = reviews.filter(created_at__gt=latest.created_at)
        if not reviews.exists():
            continue
        jobs.append(
            job_enqueue(
                kind="flags_calibrate",
                params={"project_id": project.pk},
                project=project,
                label="Refit the flags' calibration from reviews",
            )
        )
    return jobs
