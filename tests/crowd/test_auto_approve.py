"""Auto-approval after the batch's delay: one service, a Celery beat task and a command."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from annotation.models import Assignment
from annotation.services import hit_claim
from crowd.models import LedgerEntry, Review
from crowd.services import assignments_auto_approve, review_reject
from crowd.tasks import assignments_auto_approve as auto_approve_task
from tests.crowd.conftest import MakeBatch, Submit


def test_it_waits_for_the_batchs_delay(make_batch: MakeBatch, submit: Submit, ann: Any) -> None:
    make_batch(auto_approve_delay=timedelta(days=2))
    submitted_at = timezone.now() - timedelta(days=2) + timedelta(minutes=1)
    assignment = submit(ann, now=submitted_at)

    assert assignments_auto_approve() == 0

    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.SUBMITTED
    assert not Review.objects.exists()


def test_it_approves_once_the_delay_has_passed(
    make_batch: MakeBatch, submit: Submit, ann: Any
) -> None:
    make_batch(auto_approve_delay=timedelta(days=2), reward_cents=15)
    assignment = submit(ann, now=timezone.now() - timedelta(days=2, minutes=1))

    assert assignments_auto_approve() == 1

    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.APPROVED
    review = Review.objects.get()
    assert review.automatic
    assert review.reviewer is None
    assert LedgerEntry.objects.get().amount_cents == 15


def test_it_uses_each_batchs_own_delay(make_batch: MakeBatch, submit: Submit, ann: Any) -> None:
    quick = make_batch(clips=1, auto_approve_delay=timedelta(hours=1))
    slow = make_batch(clips=1, auto_approve_delay=timedelta(days=7))
    two_hours_ago = timezone.now() - timedelta(hours=2)
    quick_one = submit(ann, now=two_hours_ago, batch=quick)
    slow_one = submit(ann, now=two_hours_ago, batch=slow)

    assert assignments_auto_approve() == 1

    assert Assignment.objects.get(pk=quick_one.pk).state == Assignment.State.APPROVED
    assert Assignment.objects.get(pk=slow_one.pk).state == Assignment.State.SUBMITTED


def test_it_leaves_reviewed_and_unsubmitted_work_alone(
    make_batch: MakeBatch, submit: Submit, ann: Any, abe: Any, rey: Any
) -> None:
    make_batch(clips=2, auto_approve_delay=timedelta(hours=1))
    long_ago = timezone.now() - timedelta(days=1)
    rejected = review_reject(assignment=submit(ann, now=long_ago), reviewer=rey, reason="off_topic")

    accepted = hit_claim(worker=abe, now=long_ago)
    assert accepted is not None

    assert assignments_auto_approve() == 0

    assert Assignment.objects.get(pk=rejected.pk).state == Assignment.State.REJECTED
    assert Assignment.objects.get(pk=accepted.pk).state == Assignment.State.ACCEPTED


def test_it_runs_as_a_command(make_batch: MakeBatch, submit: Submit, ann: Any) -> None:
    make_batch(auto_approve_delay=timedelta(0))
    submit(ann, now=timezone.now() - timedelta(seconds=1))
    out = StringIO()
    call_command("auto_approve", stdout=out)
    assert out.getvalue().strip() == "1 assignment auto-approved."
    assert Assignment.objects.get().state == Assignment.State.APPROVED


def test_it_runs_as_a_periodic_task(make_batch: MakeBatch, submit: Submit, ann: Any) -> None:
    make_batch(auto_approve_delay=timedelta(0))
    submit(ann, now=timezone.now() - timedelta(seconds=1))
    assert auto_approve_task.apply().get() == 1
    schedule = settings.CELERY_BEAT_SCHEDULE["assignments-auto-approve"]
    assert schedule["task"] == auto_approve_task.name
