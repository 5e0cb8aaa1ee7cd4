"""Failure 5: the broker is down (its port closed) when a request stores data and queues a
job. The request still succeeds, the job waits `queued` without a message, and the
re-dispatch sweep sends it once the broker is back (a transactional outbox: the job row is
the outbox, `dispatched_at` its sent mark). The same sweep sends again the message of a
job a killed worker held."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from annotation.models import Caption
from core.models import Job, WorkerHeartbeat
from core.services import job_enqueue, jobs_redispatch
from core.tasks import run_job
from earmark.celery import app as celery_app
from tests.active.conftest import claim
from tests.annotation.factories import listened, make_clips, make_subset, publish
from tests.conftest import login

pytestmark = pytest.mark.django_db(transaction=True)

DEAD_BROKER = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture(autouse=True)
def kinds(test_kinds: Callable[[str], None]) -> None:
    test_kinds("text")


@pytest.fixture
def broker_down(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Points Celery at a closed port and back afterwards (Celery prefers the
    CELERY_BROKER_URL variable, so that is set too). The pools of connections to the working
    broker that earlier tests opened are set aside meanwhile, so publishing really connects."""
    previous = celery_app.conf.broker_url
    settings.CELERY_BROKER_URL = DEAD_BROKER
    monkeypatch.setenv("CELERY_BROKER_URL", DEAD_BROKER)
    monkeypatch.setattr(celery_app, "_pool", None)
    monkeypatch.setattr(celery_app.amqp, "_producer_pool", None)
    celery_app.conf["broker_url"] = DEAD_BROKER
    try:
        yield
    finally:
        celery_app.conf["broker_url"] = previous


@pytest.fixture
def broker_back(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[tuple[Any, ...]]]:
    """From the call on, a working broker: returns the list of job messages it gets."""

    def back() -> list[tuple[Any, ...]]:
        messages: list[tuple[Any, ...]] = []
        monkeypatch.setattr(
            run_job, "apply_async", lambda **kwargs: messages.append(kwargs["args"])
        )
        return messages

    return back


def _enqueue_with_broker_down() -> Job:
    with transaction.atomic():
        job = job_enqueue(kind="rel_sleep_once", params={"seconds": 0})
    job.refresh_from_db()
    return job


@pytest.mark.usefixtures("broker_down")
def test_a_job_stored_while_the_broker_is_down_waits_queued_without_failing_the_caller() -> None:
    job = _enqueue_with_broker_down()  # the commit's dispatch failed and raised nothing

    assert job.state == Job.State.QUEUED
    assert job.dispatched_at is None


def test_the_redispatch_sweep_sends_it_once_the_broker_is_back(
    broker_down: None, broker_back: Callable[[], list[tuple[Any, ...]]], settings: Any
) -> None:
    job = _enqueue_with_broker_down()
    sent = broker_back()
    later = timezone.now() + timedelta(seconds=settings.JOB_REDISPATCH_SECONDS + 1)

    assert jobs_redispatch(now=timezone.now()) == 0  # too young: its message may be on the way
    assert jobs_redispatch(now=later) == 1

    job.refresh_from_db()
    assert sent == [(job.pk,)]
    assert job.dispatched_at is not None
    assert jobs_redispatch(now=later) == 0  # sent once


def test_the_redispatch_sweep_sends_again_a_message_a_broker_restart_lost(
    broker_back: Callable[[], list[tuple[Any, ...]]], settings: Any
) -> None:
    sent = broker_back()
    job = job_enqueue(kind="rel_sleep_once", params={"seconds": 0})  # committed and sent
    sent.clear()
    lost = timezone.now() + timedelta(seconds=settings.JOB_REDISPATCH_LOST_SECONDS + 1)

    assert jobs_redispatch(now=lost) == 1
    assert sent == [(job.pk,)]


# A worker killed holding a job's message (found by benchmarks/chaos.py): Redis gives the
# message back only after its visibility timeout, an hour, so the job waited `queued`.


def _worker_alive(hostname: str, queues: str, *, at: datetime) -> None:
    WorkerHeartbeat.objects.create(hostname=hostname, queues=queues, pid=4242, last_seen=at)


def _sent_job(broker_back: Callable[[], list[tuple[Any, ...]]]) -> tuple[Job, list[Any]]:
    sent = broker_back()
    job = job_enqueue(kind="rel_sleep_once", params={"seconds": 0})  # committed and sent
    sent.clear()
    return job, sent


def test_the_redispatch_sweep_sends_again_a_message_a_killed_worker_held(
    broker_back: Callable[[], list[tuple[Any, ...]]], settings: Any
) -> None:
    job, sent = _sent_job(broker_back)
    later = timezone.now() + timedelta(seconds=settings.JOB_REDISPATCH_SECONDS + 1)
    # a live worker serving the job's queue runs nothing, yet never took the job
    _worker_alive("cpu@box", "default,text", at=later)

    assert jobs_redispatch(now=later - timedelta(seconds=2)) == 0  # too young
    assert jobs_redispatch(now=later) == 1
    assert sent == [(job.pk,)]


def test_a_job_waiting_behind_a_busy_worker_is_not_sent_again(
    broker_back: Callable[[], list[tuple[Any, ...]]], settings: Any
) -> None:
    _, sent = _sent_job(broker_back)
    later = timezone.now() + timedelta(seconds=settings.JOB_REDISPATCH_SECONDS + 1)
    _worker_alive("cpu@box", "default,text", at=later)
    Job.objects.create(
        kind="rel_sleep_once",
        label="a long one",
        queue="default",
        state=Job.State.RUNNING,
        worker="cpu@box",
        execution="e1",
        lease_expires_at=later + timedelta(minutes=1),
    )

    assert jobs_redispatch(now=later) == 0  # its message may well wait in the queue
    assert sent == []


def test_a_job_no_live_worker_serves_is_not_sent_again(
    broker_back: Callable[[], list[tuple[Any, ...]]], settings: Any
) -> None:
    _, sent = _sent_job(broker_back)
    later = timezone.now() + timedelta(seconds=settings.JOB_REDISPATCH_SECONDS + 1)
    _worker_alive("gpu0@box", "gpu", at=later)  # idle, on another queue
    _worker_alive("cpu@box", "default,text", at=later - timedelta(hours=1))  # long dead

    assert jobs_redispatch(now=later) == 0  # its message waits in the queue for a worker
    assert sent == []


@pytest.mark.usefixtures("broker_down")
def test_a_submit_with_its_check_queued_answers_ok_and_keeps_the_captions(
    settings: Any, project: Any, ann: Any
) -> None:
    settings.ACTIVE_FLAG_ON_SUBMIT = True
    [clip] = make_clips(1)
    assignment = listened(claim(ann, publish(make_subset(project, [clip]))))

    response = login(ann).post(
        reverse("assignment_submit", args=[assignment.pk]),
        {f"caption-{clip.pk}": "a dog barks twice in a quiet room"},
    )

    assert response.status_code == 302  # on to the next HIT, not a 500
    assert Caption.objects.get(assignment=assignment).text == "a dog barks twice in a quiet room"
    check = Job.objects.get(kind="captions_flag")
    assert (check.state, check.dispatched_at) == (Job.State.QUEUED, None)


def test_the_readme_states_the_default_of_active_flag_on_submit_that_settings_use() -> None:
    """With the check on every submit off by default, a broker outage costs submits nothing."""
    from django.conf import settings as configured

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `ACTIVE_FLAG_ON_SUBMIT`"))
    assert row.split("|")[2].strip() == f"`{int(configured.ACTIVE_FLAG_ON_SUBMIT)}`" == "`0`"
