"""Jobs: running, failing, cancelling, retrying and recovering from lost workers, through
core.services and the jobs pages. Test-only job kinds point at the handlers below."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from core.jobs import JOB_KINDS, JobKind
from core.models import Job, ProcessExit, Project, WorkerHeartbeat
from core.services import (
    Progress,
    job_cancel,
    job_create,
    job_retry,
    job_run,
    job_run_inline,
    jobs_fail_lost,
    jobs_recover_restarted,
)
from core.tasks import run_job
from tests.conftest import login

handled_jobs: list[int] = []  # job ids, appended by count_handler


def ok_handler(*, job: Job, progress: Progress, count: int) -> dict[str, Any]:
    for step in range(1, count + 1):
        progress(step, count, f"step {step}")
    return {"count": count}


def failing_handler(*, job: Job, progress: Progress, message: str) -> dict[str, Any]:
    progress(1, 4, "about to fail")
    raise RuntimeError(message)


def invalid_handler(*, job: Job, progress: Progress) -> dict[str, Any]:
    raise ValidationError(["Row 3 has no label.", "Row 9 has no label."])


def self_cancelling_handler(*, job: Job, progress: Progress) -> dict[str, Any]:
    job_cancel(job=job)  # as if someone pressed Cancel on the jobs page meanwhile
    progress(1, 10, "still going")
    raise AssertionError("progress() should have raised JobCancelled")


def count_handler(*, job: Job, progress: Progress) -> dict[str, Any]:
    handled_jobs.append(job.pk)
    return {}


TEST_KINDS = {
    "test_ok": ok_handler,
    "test_fail": failing_handler,
    "test_invalid": invalid_handler,
    "test_self_cancel": self_cancelling_handler,
    "test_count": count_handler,
}


@pytest.fixture(autouse=True)
def test_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    for kind, handler in TEST_KINDS.items():
        spec = JobKind(f"Test {kind}", f"{__name__}.{handler.__name__}", "text")
        monkeypatch.setitem(JOB_KINDS, kind, spec)
    handled_jobs.clear()


@pytest.fixture
def make_job(project: Project, alice: Any) -> Callable[..., Job]:
    def make(kind: str = "test_ok", **params: Any) -> Job:
        return job_create(kind=kind, params=params, project=project, created_by=alice)

    return make


@pytest.fixture
def failed_job(make_job: Callable[..., Job]) -> Job:
    job = make_job("test_fail", message="disk <full> on /data")
    return job_run(job_id=job.pk)


def _set_running(
    job: Job,
    *,
    worker: str = "",
    lease_left: timedelta = timedelta(minutes=1),
    pid: int = 4242,
    instance: str = "another-process",
) -> None:
    """As if a runner elsewhere had started the job: its execution, its process and a lease
    running out `lease_left` from now (negative: already ran out)."""
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING,
        started_at=timezone.now(),
        worker=worker,
        execution="elsewhere",
        runner_instance=instance,
        runner_pid=pid,
        lease_expires_at=timezone.now() + lease_left,
        attempts=1,
    )


# job_create / job_run ------------------------------------------------------------------


def test_it_queues_a_new_job_on_its_kinds_queue(make_job: Callable[..., Job]) -> None:
    job = make_job(count=1)
    job.refresh_from_db()
    assert (job.state, job.queue, job.label) == (Job.State.QUEUED, "text", "Test test_ok")


def test_it_rejects_an_unknown_kind_listing_the_known_ones(project: Project) -> None:
    with pytest.raises(ValueError, match="'nope'") as raised:
        job_create(kind="nope", params={}, project=project)
    assert "ontology_import" in str(raised.value)
    assert "test_ok" in str(raised.value)
    assert not Job.objects.exists()


def test_it_records_a_successful_run(make_job: Callable[..., Job]) -> None:
    job = make_job(count=3)
    job_run(job_id=job.pk, worker="celery@box")
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED
    assert job.result == {"count": 3}
    assert (job.progress_done, job.progress_total, job.progress_message) == (3, 3, "step 3")
    assert job.worker == "celery@box"
    assert job.error == ""
    assert job.started_at is not None
    assert job.finished_at is not None
    assert job.started_at <= job.finished_at


def test_it_reports_full_percent_for_a_succeeded_job(make_job: Callable[..., Job]) -> None:
    job = job_run(job_id=make_job(count=2).pk)
    job.refresh_from_db()
    assert job.percent == 100


def test_it_records_a_failure_with_error_and_traceback(make_job: Callable[..., Job]) -> None:
    job = make_job("test_fail", message="disk full")
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert job.error == "disk full"
    assert "RuntimeError: disk full" in job.traceback
    assert "failing_handler" in job.traceback
    assert job.finished_at is not None


def test_it_keeps_the_progress_a_failed_job_reached(make_job: Callable[..., Job]) -> None:
    job = make_job("test_fail", message="disk full")
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.progress_done, job.progress_total, job.progress_message) == (1, 4, "about to fail")


def test_it_records_validation_errors_by_their_messages(make_job: Callable[..., Job]) -> None:
    job = make_job("test_invalid")
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert job.error == "Row 3 has no label.; Row 9 has no label."


@pytest.mark.parametrize("state", [Job.State.SUCCEEDED, Job.State.FAILED, Job.State.CANCELLED])
def test_it_does_not_rerun_a_finished_job(make_job: Callable[..., Job], state: str) -> None:
    job = make_job("test_count")
    finished_at = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(pk=job.pk).update(state=state, finished_at=finished_at)
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert handled_jobs == []
    assert (job.state, job.finished_at) == (state, finished_at)


def test_it_does_not_rerun_a_running_job(make_job: Callable[..., Job]) -> None:
    job = make_job("test_count")
    _set_running(job, worker="celery@first")
    job_run(job_id=job.pk, worker="celery@second")
    job.refresh_from_db()
    assert handled_jobs == []
    assert (job.state, job.worker) == (Job.State.RUNNING, "celery@first")


def test_it_runs_a_job_once_when_delivered_twice(make_job: Callable[..., Job]) -> None:
    job = make_job("test_count")
    job_run(job_id=job.pk)
    job_run(job_id=job.pk)
    assert handled_jobs == [job.pk]


def test_it_runs_inline_jobs_without_a_worker(project: Project) -> None:
    job = job_run_inline(kind="test_ok", params={"count": 1}, project=project)
    job.refresh_from_db()
    assert (job.state, job.worker) == (Job.State.SUCCEEDED, "")


# job_cancel ----------------------------------------------------------------------------


def test_it_cancels_a_queued_job_at_once(make_job: Callable[..., Job]) -> None:
    job = make_job("test_count")
    job_cancel(job=job)
    job.refresh_from_db()
    assert job.state == Job.State.CANCELLED
    assert job.finished_at is not None
    assert job.error == "Cancelled before it started."


def test_it_never_runs_a_job_cancelled_while_queued(make_job: Callable[..., Job]) -> None:
    job = make_job("test_count")
    job_cancel(job=job)
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert handled_jobs == []
    assert job.state == Job.State.CANCELLED


def test_it_only_flags_a_running_job_for_cancelling(make_job: Callable[..., Job]) -> None:
    job = make_job("test_count")
    _set_running(job, worker="celery@box")
    job_cancel(job=job)
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    assert job.cancel_requested is True
    assert job.finished_at is None


def test_it_stops_a_running_job_at_its_next_progress_report(
    make_job: Callable[..., Job],
) -> None:
    job = make_job("test_self_cancel")
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == Job.State.CANCELLED
    assert job.error == "Cancelled on request."
    assert job.finished_at is not None
    assert job.progress_message == "still going"


def test_it_writes_progress_made_inside_a_transaction(make_job: Callable[..., Job]) -> None:
    """Test cases may query only "default", so the test settings define no PROGRESS_DB and
    progress inside a transaction goes through the job's own connection."""
    assert settings.PROGRESS_DB not in settings.DATABASES
    job = make_job("test_ok")
    with transaction.atomic():
        Progress(job, interval=0)(3, 10, "three")
        job.refresh_from_db()
    assert (job.progress_done, job.progress_total, job.progress_message) == (3, 10, "three")


def test_it_refuses_to_cancel_a_finished_job(failed_job: Job) -> None:
    with pytest.raises(ValidationError, match="already finished"):
        job_cancel(job=failed_job)
    failed_job.refresh_from_db()
    assert failed_job.state == Job.State.FAILED


# job_retry -----------------------------------------------------------------------------


def test_it_retries_a_failed_job_as_a_new_queued_job(
    failed_job: Job, rey: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        retry = job_retry(job=failed_job, user=rey)
    assert len(callbacks) == 1
    retry.refresh_from_db()
    assert retry.pk != failed_job.pk
    assert retry.state == Job.State.QUEUED
    assert retry.retry_of == failed_job
    assert (retry.kind, retry.params, retry.project, retry.label) == (
        failed_job.kind,
        failed_job.params,
        failed_job.project,
        failed_job.label,
    )
    assert retry.created_by == rey


def test_it_sends_a_retry_to_its_queue_after_commit(
    failed_job: Job,
    alice: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(run_job, "apply_async", lambda **kwargs: sent.append(kwargs))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        retry = job_retry(job=failed_job, user=alice)
    assert sent == []  # nothing leaves before the transaction commits
    for callback in callbacks:
        callback()
    assert sent == [{"args": (retry.pk,), "queue": "text", "task_id": retry.celery_task_id}]
    assert retry.celery_task_id


def test_it_retries_a_cancelled_job(
    make_job: Callable[..., Job], alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    job = job_cancel(job=make_job("test_count"))
    with django_capture_on_commit_callbacks(execute=False):
        retry = job_retry(job=job, user=alice)
    assert retry.retry_of_id == job.pk
    assert list(job.retries.all()) == [retry]


@pytest.mark.parametrize("state", [Job.State.QUEUED, Job.State.RUNNING, Job.State.SUCCEEDED])
def test_it_refuses_to_retry_a_job_that_did_not_fail(
    make_job: Callable[..., Job], alice: Any, state: str
) -> None:
    job = make_job("test_count")
    if state == Job.State.RUNNING:
        _set_running(job)
    finished_at = timezone.now() if state == Job.State.SUCCEEDED else None
    Job.objects.filter(pk=job.pk).update(state=state, finished_at=finished_at)
    job.refresh_from_db()
    with pytest.raises(ValidationError, match="only failed or cancelled jobs retry"):
        job_retry(job=job, user=alice)
    assert Job.objects.count() == 1


# jobs_fail_lost ------------------------------------------------------------------------


@pytest.fixture
def workers(db: None) -> None:
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="celery@alive", queues="default", pid=1, last_seen=now)


def test_it_fails_a_running_job_whose_lease_ran_out(make_job: Callable[..., Job]) -> None:
    job = make_job("test_count")
    _set_running(job, worker="celery@dead", lease_left=-timedelta(seconds=1))
    assert jobs_fail_lost() == 1
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert job.error == (
        "Worker celery@dead (pid 4242) stopped renewing its lease while running this job."
    )
    assert job.finished_at is not None
    assert job.lease_expires_at is None


@pytest.mark.usefixtures("workers")
def test_it_fails_a_lost_job_though_a_worker_of_the_same_name_beats(
    make_job: Callable[..., Job],
) -> None:
    """A worker killed and restarted under its name heartbeats again; its old job does not."""
    job = make_job("test_count")
    _set_running(job, worker="celery@alive", lease_left=-timedelta(seconds=1))
    assert jobs_fail_lost() == 1
    job.refresh_from_db()
    assert job.state == Job.State.FAILED


def test_it_fails_a_lost_job_of_a_command(make_job: Callable[..., Job]) -> None:
    job = make_job("test_count")
    _set_running(job, worker="", lease_left=-timedelta(seconds=1))
    assert jobs_fail_lost() == 1
    job.refresh_from_db()
    assert job.state == Job.State.FAILED
    assert job.error == "The command (pid 4242) stopped renewing its lease while running this job."


@pytest.mark.usefixtures("workers")
@pytest.mark.parametrize("worker", ["celery@alive", "celery@gone", ""])
def test_it_leaves_a_running_job_whose_lease_is_current(
    make_job: Callable[..., Job], worker: str
) -> None:
    job = make_job("test_count")
    _set_running(job, worker=worker, lease_left=timedelta(seconds=5))
    assert jobs_fail_lost() == 0
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING


def test_it_queues_a_lost_job_of_a_rerun_safe_kind_again(
    make_job: Callable[..., Job],
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    monkeypatch.setitem(
        JOB_KINDS, "test_ok", JobKind("Test", f"{__name__}.ok_handler", "text", True)
    )
    job = make_job("test_ok", count=2)
    _set_running(job, worker="celery@dead", lease_left=-timedelta(seconds=1))
    Job.objects.filter(pk=job.pk).update(celery_task_id="sent-through-the-broker")
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(run_job, "apply_async", lambda **kwargs: sent.append(kwargs))

    with django_capture_on_commit_callbacks(execute=True):
        assert jobs_fail_lost() == 1

    job.refresh_from_db()
    assert (job.state, job.execution, job.lease_expires_at) == (Job.State.QUEUED, "", None)
    assert "stopped renewing its lease while running this job. Queued again (attempt 2)" in (
        job.log
    )
    assert [kwargs["args"] for kwargs in sent] == [(job.pk,)]
    job = job_run(job_id=job.pk)
    assert (job.state, job.attempts) == (Job.State.SUCCEEDED, 2)


def test_it_fails_a_rerun_safe_job_lost_on_its_last_attempt(
    make_job: Callable[..., Job], monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    monkeypatch.setitem(
        JOB_KINDS, "test_ok", JobKind("Test", f"{__name__}.ok_handler", "text", True)
    )
    settings.JOB_MAX_ATTEMPTS = 1
    job = make_job("test_ok", count=2)
    _set_running(job, worker="celery@dead", lease_left=-timedelta(seconds=1))
    Job.objects.filter(pk=job.pk).update(celery_task_id="sent-through-the-broker")
    assert jobs_fail_lost() == 1
    job.refresh_from_db()
    assert job.state == Job.State.FAILED


def test_it_fails_a_lost_rerun_safe_job_that_a_command_ran(
    make_job: Callable[..., Job], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its parameters name the command's machine's files: no worker takes it over."""
    monkeypatch.setitem(
        JOB_KINDS, "test_ok", JobKind("Test", f"{__name__}.ok_handler", "text", True)
    )
    job = make_job("test_ok", count=2)  # job_create: run inline, never queued
    _set_running(job, worker="", lease_left=-timedelta(seconds=1))
    assert jobs_fail_lost() == 1
    job.refresh_from_db()
    assert job.state == Job.State.FAILED


def test_it_cancels_at_once_a_job_whose_runner_is_gone(make_job: Callable[..., Job]) -> None:
    job = make_job("test_count")
    _set_running(job, worker="celery@dead", lease_left=-timedelta(seconds=1))
    job = job_cancel(job=job)
    assert job.state == Job.State.CANCELLED
    assert job.error == "Cancelled; worker celery@dead (pid 4242) had stopped running it."


# Pages ---------------------------------------------------------------------------------


def test_it_shows_a_failed_jobs_error_on_the_jobs_page(failed_job: Job, alice: Any) -> None:
    response = login(alice).get(reverse("job_list"))
    assert response.status_code == 200
    assert f'data-job="{failed_job.pk}" data-state="failed"'.encode() in response.content
    assert b"disk &lt;full&gt; on /data" in response.content


def test_it_filters_the_jobs_page_by_state(
    failed_job: Job, make_job: Callable[..., Job], alice: Any
) -> None:
    queued = make_job("test_count")
    response = login(alice).get(reverse("job_list"), {"state": "queued"})
    assert response.status_code == 200
    assert f'data-job="{queued.pk}"'.encode() in response.content
    assert f'data-job="{failed_job.pk}"'.encode() not in response.content


def _dead_worker(queues: str, *, minutes_ago: int) -> datetime:
    """A heartbeat row left by a worker that died `minutes_ago`; returns its last beat."""
    last = timezone.now() - timedelta(minutes=minutes_ago)
    WorkerHeartbeat.objects.create(hostname="cpu@dead", queues=queues, pid=1, last_seen=last)
    return last


def _unserved_warning(content: bytes) -> str:
    found = re.search(
        rb'<p class="flash error"[^>]*data-testid="unserved-queue">(.*?)</p>', content, re.S
    )
    return " ".join(re.sub(r"<[^>]+>", "", found.group(1).decode()).split()) if found else ""


def test_the_jobs_page_warns_that_no_worker_serves_a_queued_jobs_queue_since_when(
    make_job: Callable[..., Job], alice: Any
) -> None:
    died = _dead_worker("default,media,text", minutes_ago=28)
    make_job("test_count")  # on the text queue
    response = login(alice).get(reverse("job_list"))
    assert _unserved_warning(response.content).startswith(
        f"No worker is serving queue text since {timezone.localtime(died):%H:%M}: "
        "jobs on it stay queued until one starts."
    )


def test_the_jobs_page_names_a_queue_no_worker_ever_served(
    make_job: Callable[..., Job], alice: Any
) -> None:
    make_job("test_count")
    response = login(alice).get(reverse("job_list"))
    assert _unserved_warning(response.content).startswith("No worker has served queue text yet:")


def test_the_jobs_page_warns_of_nothing_while_a_worker_serves_the_queue(
    make_job: Callable[..., Job], alice: Any
) -> None:
    _dead_worker("text", minutes_ago=28)
    WorkerHeartbeat.objects.create(hostname="cpu@alive", queues="default,text", pid=2)
    make_job("test_count")
    response = login(alice).get(reverse("job_list"))
    assert response.status_code == 200
    assert b"unserved-queue" not in response.content


def test_the_jobs_page_warns_of_nothing_when_no_job_waits(failed_job: Job, alice: Any) -> None:
    _dead_worker("text", minutes_ago=28)  # failed_job ran on the text queue; none waits there
    response = login(alice).get(reverse("job_list"))
    assert b"unserved-queue" not in response.content


def test_a_queued_jobs_page_warns_that_no_worker_serves_its_queue(
    make_job: Callable[..., Job], alice: Any
) -> None:
    died = _dead_worker("text", minutes_ago=5)
    job = make_job("test_count")
    response = login(alice).get(job.get_absolute_url())
    assert _unserved_warning(response.content).startswith(
        f"No worker is serving queue text since {timezone.localtime(died):%H:%M}:"
    )


def test_a_finished_jobs_page_warns_of_nothing(failed_job: Job, alice: Any) -> None:
    _dead_worker("text", minutes_ago=5)
    response = login(alice).get(failed_job.get_absolute_url())
    assert b"unserved-queue" not in response.content


@pytest.mark.usefixtures("project")  # alice researches in it, so she sees jobs
def test_the_jobs_page_lists_stack_processes_that_died_today(alice: Any) -> None:
    ProcessExit.objects.create(
        program="worker-cpu",
        pid=4321,
        returncode=-9,
        started_at=timezone.now() - timedelta(minutes=30),
        restart_delay=1.0,
        log_tail="CRITICAL/MainProcess Unrecoverable error: JSONDecodeError",
    )
    ProcessExit.objects.create(  # yesterday's: not listed
        program="beat",
        pid=99,
        returncode=1,
        started_at=timezone.now() - timedelta(days=2),
        exited_at=timezone.now() - timedelta(hours=25),
        restart_delay=1.0,
    )
    response = login(alice).get(reverse("job_list"))
    assert b"1 process of this stack stopped in the last 24 hours" in response.content
    assert b"<strong>worker-cpu</strong> (pid 4321) killed by SIGKILL" in response.content
    assert b"(pid 99)" not in response.content
    assert b"JSONDecodeError" not in response.content  # its log is for staff


def test_staff_read_the_end_of_a_dead_processs_log_on_the_jobs_page(staff: Any) -> None:
    ProcessExit.objects.create(
        program="worker-cpu",
        pid=4321,
        returncode=1,
        started_at=timezone.now() - timedelta(minutes=30),
        restart_delay=1.0,
        log_tail="CRITICAL/MainProcess Unrecoverable error: JSONDecodeError",
    )
    response = login(staff).get(reverse("job_list"))
    assert b"<strong>worker-cpu</strong> (pid 4321) exited with code 1" in response.content
    assert b"Unrecoverable error: JSONDecodeError" in response.content


def test_it_shows_error_and_traceback_on_the_job_page(failed_job: Job, alice: Any) -> None:
    response = login(alice).get(failed_job.get_absolute_url())
    assert response.status_code == 200
    assert b'<pre class="error" data-testid="job-error">disk &lt;full&gt; on /data</pre>' in (
        response.content
    )
    assert b"RuntimeError: disk &lt;full&gt; on /data" in response.content


def test_it_offers_retry_for_a_failed_job(failed_job: Job, alice: Any) -> None:
    response = login(alice).get(failed_job.get_absolute_url())
    assert response.status_code == 200
    assert f'action="{reverse("job_retry", args=[failed_job.pk])}"'.encode() in response.content
    assert b">Retry</button>" in response.content


def test_it_offers_no_retry_for_a_succeeded_job(make_job: Callable[..., Job], alice: Any) -> None:
    job = job_run(job_id=make_job(count=1).pk)
    response = login(alice).get(job.get_absolute_url())
    assert response.status_code == 200
    assert b">Retry</button>" not in response.content


def test_it_retries_from_the_job_page(
    failed_job: Job, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = login(alice).post(reverse("job_retry", args=[failed_job.pk]))
    assert len(callbacks) == 1
    retry = Job.objects.get(retry_of=failed_job)
    assert response.status_code == 302
    assert response["Location"] == retry.get_absolute_url()
    assert retry.state == Job.State.QUEUED
    assert retry.created_by == alice


def test_it_refuses_get_on_retry(failed_job: Job, alice: Any) -> None:
    response = login(alice).get(reverse("job_retry", args=[failed_job.pk]))
    assert response.status_code == 405
    assert not Job.objects.filter(retry_of=failed_job).exists()


def test_it_explains_why_a_succeeded_job_cannot_retry(
    make_job: Callable[..., Job], alice: Any
) -> None:
    job = job_run(job_id=make_job(count=1).pk)
    response = login(alice).post(reverse("job_retry", args=[job.pk]), follow=True)
    assert response.status_code == 200
    assert response.redirect_chain == [(job.get_absolute_url(), 302)]
    assert b"only failed or cancelled jobs retry" in response.content
    assert Job.objects.count() == 1


def test_it_requests_cancelling_from_the_job_page(make_job: Callable[..., Job], alice: Any) -> None:
    job = make_job("test_count")
    _set_running(job, worker="celery@box")
    response = login(alice).post(reverse("job_cancel", args=[job.pk]))
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.cancel_requested is True
    assert job.state == Job.State.RUNNING


def test_a_restarted_worker_ends_the_jobs_its_previous_process_left(
    make_job: Callable[..., Job],
) -> None:
    left = make_job("test_count")
    _set_running(left, worker="celery@box", pid=2**22 + 17)  # no such process
    other = make_job("test_count")
    _set_running(other, worker="celery@elsewhere", pid=2**22 + 17)

    assert jobs_recover_restarted(worker="celery@box") == 1

    left.refresh_from_db()
    other.refresh_from_db()
    assert left.state == Job.State.FAILED
    assert left.error == (
        f"Worker celery@box (pid {2**22 + 17}) was gone when the worker restarted."
    )
    assert other.state == Job.State.RUNNING  # another worker's: its lease decides


def test_a_restarted_worker_that_got_its_old_pid_back_still_ends_the_old_jobs(
    make_job: Callable[..., Job],
) -> None:
    """A container restarted gives the worker the same pid; the instance id tells them apart."""
    left = make_job("test_count")
    _set_running(left, worker="celery@box", pid=os.getpid(), instance="before-the-restart")

    assert jobs_recover_restarted(worker="celery@box") == 1

    left.refresh_from_db()
    assert left.state == Job.State.FAILED


@pytest.mark.parametrize(
    ("done", "total", "message", "text"),
    [
        (42, 42, "captioning clips", "captioning clips: 42 of 42"),
        (1200, 3000, "", "1,200 of 3,000"),
        (0, None, "ranking", "ranking"),
        (7, None, "", "7"),
    ],
)
def test_progress_reads_stage_then_count_once(
    done: int, total: int | None, message: str, text: str
) -> None:
    job = Job(progress_done=done, progress_total=total, progress_message=message)

    assert job.progress_text == text
