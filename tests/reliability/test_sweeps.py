"""Failure 4: the periodic sweeps (lost jobs, expired assignments, re-dispatch, …) run while
any worker is up, not only the default queue's, and /healthz turns 503 naming a sweep that
fell behind, so an operator hears about it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.utils import timezone

from core.models import SweepRun, WorkerHeartbeat
from core.signals import sweep_tasks
from core.tasks import jobs_fail_lost

pytestmark = pytest.mark.django_db


def test_every_periodic_sweep_goes_to_the_queue_every_worker_serves() -> None:
    assert settings.CELERY_BEAT_SCHEDULE
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        assert entry["options"]["queue"] == settings.SWEEPS_QUEUE, name
        # a sweep message nobody took within its interval is dropped, not run in a pile later
        assert entry["options"]["expires"] == entry["schedule"], name
    assert settings.SWEEPS_QUEUE in {queue.name for queue in settings.CELERY_TASK_QUEUES}


def test_a_sweep_that_ran_is_recorded_with_its_time() -> None:
    before = timezone.now()

    jobs_fail_lost.apply()

    run = SweepRun.objects.get(task="core.tasks.jobs_fail_lost")
    assert run.last_ok is True
    assert run.last_run_at >= before


def test_a_failing_sweep_is_recorded_with_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(**kwargs: object) -> int:
        raise RuntimeError("database is read-only")

    monkeypatch.setattr("core.services.jobs_fail_lost", broken)

    jobs_fail_lost.apply()

    run = SweepRun.objects.get(task="core.tasks.jobs_fail_lost")
    assert run.last_ok is False
    assert "database is read-only" in run.last_error


MONITORING_TOKEN = "monitoring-token-for-sweep-tests"


def _healthz_sweeps() -> tuple[int, dict[str, object]]:
    """/healthz's sweeps check as monitoring reads it (the public sees no details)."""
    with override_settings(HEALTHZ_TOKEN=MONITORING_TOKEN):
        response = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {MONITORING_TOKEN}")
    return response.status_code, response.json()["checks"]["sweeps"]


def _all_ran(ago: timedelta) -> None:
    for task in sweep_tasks():
        SweepRun.objects.create(task=task, last_run_at=timezone.now() - ago)


def test_healthz_is_up_while_every_sweep_runs_on_time() -> None:
    WorkerHeartbeat.objects.create(
        hostname="celery@a", queues="default,gpu,media,sweeps,text", pid=1
    )
    _all_ran(timedelta(seconds=5))

    status, sweeps = _healthz_sweeps()

    assert sweeps["ok"] is True
    assert status == 200


def test_healthz_is_down_naming_a_sweep_that_fell_behind() -> None:
    WorkerHeartbeat.objects.create(
        hostname="celery@a", queues="default,gpu,media,sweeps,text", pid=1
    )
    _all_ran(timedelta(seconds=5))
    SweepRun.objects.filter(task="core.tasks.jobs_fail_lost").update(
        last_run_at=timezone.now() - timedelta(minutes=12)
    )

    status, sweeps = _healthz_sweeps()

    assert status == 503
    assert sweeps["ok"] is False
    assert sweeps["detail"] == "late: core.tasks.jobs_fail_lost last ran 12 min ago (every 60 s)"


def test_healthz_counts_a_sweep_that_never_ran_once_a_worker_has_been_up_long_enough() -> None:
    WorkerHeartbeat.objects.create(
        hostname="celery@a",
        queues="default,gpu,media,sweeps,text",
        pid=1,
        started_at=timezone.now() - timedelta(hours=1),
    )

    status, sweeps = _healthz_sweeps()

    assert status == 503
    assert "core.tasks.jobs_fail_lost never ran (every 60 s)" in str(sweeps["detail"])


def test_healthz_gives_freshly_started_workers_time_for_the_first_sweeps() -> None:
    WorkerHeartbeat.objects.create(
        hostname="celery@a", queues="default,gpu,media,sweeps,text", pid=1
    )

    _, sweeps = _healthz_sweeps()

    assert sweeps["ok"] is True
