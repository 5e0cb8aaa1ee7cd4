"""The life of a job (a `core.models.Job` row): creating and enqueueing it, dispatching it
to its queue, running it under a lease with `Progress` reports, retrying and cancelling it,
and the sweeps that end or re-send jobs whose runner or message was lost. Which kinds exist,
and which handler and queue each has, is `core.jobs`' registry.

A job moves queued → running → succeeded | failed | cancelled, and only so (a runner that
was lost may also send it back to queued, for kinds safe to run again). Every transition is
a compare-and-set under the row lock: starting needs `queued`, finishing needs `running`
with the execution token the runner got when it started, so a runner that lost the job
(frozen past its lease and swept, or taken over) writes nothing."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import traceback as tb
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import (
    DataError,
    Error,
    IntegrityError,
    connection,
    connections,
    transaction,
)
from django.db.models import Q, QuerySet
from django.utils import timezone

from core.execution import RUNNER_INSTANCE, job_finished
from core.jobs import job_kind
from core.models import Job, Project, WorkerHeartbeat
from core.reconnect import connection_lost, with_reconnect

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class JobCancelled(Exception):
    pass


class JobLost(Exception):
    """This runner no longer holds its job: the job was swept (its lease ran out while the
    process was frozen or cut off), failed, sent back to its queue or taken over by another
    execution. The runner stops and writes nothing more."""


class JobTerminated(BaseException):
    """SIGTERM reached a command running a job (see `stop_on_sigterm`). A BaseException, so
    a handler's `except Exception` does not swallow it."""


def _lease_end(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(seconds=settings.JOB_LEASE_SECONDS)


class Progress:
    """Reports a running job's progress to the database, at most every `interval` seconds.

    Handlers call `progress(done, total, message)`; a cancel request made on the jobs
    page surfaces here as JobCancelled, so long loops stop at their next report. Each report
    renews the job's lease; one that finds the job no longer held by this execution raises
    JobLost.
    """

    def __init__(
        self, job: Job, *, interval: float = 0.5, echo: Callable[[str], None] | None = None
    ) -> None:
        self.job = job
        self.interval = interval
        self.echo = echo
        self._last_write = 0.0

    def __call__(self, done: int, total: int | None = None, message: str = "") -> None:
        now = time.monotonic()
        final = total is not None and done >= total
        if not final and now - self._last_write < self.interval:
            return
        self._last_write = now
        total = total if total is not None else self.job.progress_total
        done = min(done, total) if total is not None else done
        cancel = self._write(
            progress_done=done,
            progress_total=total,
            progress_message=message[:300],
            updated_at=timezone.now(),
        )
        self.job.progress_done, self.job.progress_total = done, total
        if self.echo:
            of = f"/{total}" if total else ""
            self.echo(f"  {done}{of} {message}".rstrip())
        if cancel:
            raise JobCancelled("Cancelled on request.")

    def _rows(self, using: str | None = None) -> QuerySet[Job]:
        """The job's row while this execution holds it (a job made by job_create and handed
        to a service directly has no execution yet: its token is "")."""
        rows = Job.objects.using(using) if using else Job.objects.all()
        return rows.filter(pk=self.job.pk, execution=self.job.execution).exclude(
            state__in=Job.FINISHED_STATES
        )

    def _write(self, **fields: Any) -> bool:
        """Updates the job row (renewing its lease) and returns whether a cancel was requested.

        A handler inside one long transaction (a segment file import) would hide its
        progress until commit, so on PostgreSQL the write goes through the separate
        PROGRESS_DB connection. That connection cannot see a job row that is itself
        uncommitted, or may fail; then the write falls back to the handler's own connection.
        (Test settings define no PROGRESS_DB: test cases may query only "default".)

        Outside a transaction a report that meets a dropped connection is made again on a
        fresh one (core.reconnect): a training run reports at every step, and one broken
        connection must not end hours of work.
        """
        if self.job.execution:
            fields["lease_expires_at"] = _lease_end()
        if connection.in_atomic_block and settings.PROGRESS_DB in connections:
            try:
                rows = self._rows(settings.PROGRESS_DB)
                if rows.update(**fields):
                    return rows.filter(cancel_requested=True).exists()
            except Error:  # DatabaseError, or InterfaceError on a connection that died
                pass

        def write() -> bool:
            rows = self._rows()
            if not rows.update(**fields):
                raise JobLost(f"Job #{self.job.pk} is no longer held by this execution.")
            return rows.filter(cancel_requested=True).exists()

        return with_reconnect(write, what=f"reporting job #{self.job.pk}'s progress")

    def log(self, line: str) -> None:
        stamp = timezone.now().strftime("%H:%M:%S")
        self.job.log += f"[{stamp}] {line}\n"
        with_reconnect(
            lambda: self._rows().update(log=self.job.log), what=f"logging to job #{self.job.pk}"
        )
        if self.echo:
            self.echo(line)


class _LeaseKeeper:
    """Renews a running job's lease from a thread every third of JOB_LEASE_SECONDS, so a
    handler busy for long without reporting progress (one long query, a torchrun child)
    keeps its job; when the process dies or freezes, renewals stop and the lease runs out.

    Not started inside a transaction (a test case's): a second connection could not see an
    uncommitted job row, and the handler's own progress reports renew the lease there."""

    def __init__(self, job: Job) -> None:
        self.job_id, self.execution = job.pk, job.execution
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _LeaseKeeper:
        if not connection.in_atomic_block:
            self._thread = threading.Thread(
                target=self._renew, name=f"job-{self.job_id}-lease", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _renew(self) -> None:
        try:
            while not self._stop.wait(settings.JOB_LEASE_SECONDS / 3):
                try:
                    Job.objects.filter(
                        pk=self.job_id, state=Job.State.RUNNING, execution=self.execution
                    ).update(lease_expires_at=_lease_end())
                except Error as exc:  # the database may be briefly away: try again
                    log.warning("job %s: could not renew its lease: %s", self.job_id, exc)
                    connection.close()
        finally:
            connection.close()  # this thread's own connection


def _retrying(write: Callable[[], _T], *, what: str) -> _T:
    """Runs a job's bookkeeping write, on a fresh connection when the last one broke: the
    handler may have lost it (database restarted, backend terminated) and the outcome must
    still be recorded. Any database error but bad data is retried (a closed SQLite handle
    raises ProgrammingError), with core.reconnect's backoff."""
    return with_reconnect(write, what=what, retry_on=_not_bad_data)


def _not_bad_data(exc: Error) -> bool:
    return not isinstance(exc, (IntegrityError, DataError))


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _runner_process_gone(job: Job) -> bool:
    """Whether the process that ran the job (on this machine) no longer exists. Its pid may
    be this very process's when a restarted container got the same pid: that is a new
    process unless it is the same instance."""
    if job.runner_pid == os.getpid():
        return job.runner_instance != RUNNER_INSTANCE
    return not _pid_alive(job.runner_pid)


def _runner_gone(job: Job, *, now: datetime, worker: str = "") -> bool:
    """Whether the job's execution certainly ended without finishing it: its lease ran out,
    or it ran on this machine — in a pool child of this very worker, or under this worker's
    name before a restart — and its process no longer exists."""
    if job.lease_expires_at is not None and job.lease_expires_at < now:
        return True
    here = job.runner_instance == RUNNER_INSTANCE or bool(worker and job.worker == worker)
    return here and _runner_process_gone(job)


def _runner_text(job: Job) -> str:
    who = f"worker {job.worker}" if job.worker else "the command"
    return f"{who} (pid {job.runner_pid})" if job.runner_pid else who


def _may_run_again(job: Job) -> bool:
    """A lost job's kind is safe to run again, attempts remain, and it came through a queue
    (a job a command ran inline never goes to a worker: its paths are the command's)."""
    try:
        safe = job_kind(job.kind).rerun_safe
    except ValueError:
        return False
    return safe and job.attempts < settings.JOB_MAX_ATTEMPTS and bool(job.celery_task_id)


def _begin_execution(job: Job, *, worker: str, now: datetime) -> None:
    """A new execution of the (locked) job by this process: queued or taken over → running."""
    job.state = Job.State.RUNNING
    job.started_at = now
    job.worker = worker
    job.execution = uuid.uuid4().hex
    job.runner_instance = RUNNER_INSTANCE
    job.runner_pid = os.getpid()
    job.lease_expires_at = _lease_end(now)
    job.attempts += 1
    job.save()


def _job_start(job_id: int, *, worker: str) -> tuple[Job, bool]:
    """Takes the job for this process: queued → running. A running job whose runner
    certainly died (its message came back because the pool child running it was killed:
    acks_late with reject_on_worker_lost) is taken over when its kind is safe to run again,
    else failed. Returns the job and whether this process now runs it."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        now = timezone.now()
        if job.state == Job.State.RUNNING and _runner_gone(job, now=now, worker=worker):
            reason = f"{_runner_text(job).capitalize()} died while running this job."
            if not _may_run_again(job):
                _end_lost(job, reason=reason, now=now)
                return job, False
            log.warning("job %s: %s Running it again here.", job.pk, reason)
            job.log += f"[{now:%H:%M:%S}] {reason} Running it again.\n"
        elif job.state != Job.State.QUEUED:
            log.info("job %s is %s, not running it", job.pk, job.state)
            return job, False
        _begin_execution(job, worker=worker, now=now)
    return job, True


def _end_lost(job: Job, *, reason: str, now: datetime) -> Job:
    """Ends a (locked, running) job whose runner is gone: back to its queue when its kind
    is safe to run again and attempts remain, else failed with `reason`."""
    if _may_run_again(job):
        job.state = Job.State.QUEUED
        job.log += f"[{now:%H:%M:%S}] {reason} Queued again (attempt {job.attempts + 1}).\n"
        job.execution, job.runner_instance, job.runner_pid = "", "", None
        job.lease_expires_at = job.dispatched_at = None
        job.save()
        transaction.on_commit(lambda: job_dispatch(job=job), robust=True)
        return job
    job.state = Job.State.FAILED
    job.finished_at = now
    job.error = reason
    job.lease_expires_at = None
    job.save()
    job_finished.send(sender=Job, job=job)
    return job


def job_create(
    *,
    kind: str,
    params: dict[str, Any],
    created_by: User | None = None,
    project: Project | None = None,
    label: str = "",
    retry_of: Job | None = None,
) -> Job:
    return _job_save(
        kind=kind,
        params=params,
        created_by=created_by,
        project=project,
        label=label,
        retry_of=retry_of,
    )


def _job_save(
    *,
    kind: str,
    params: dict[str, Any],
    created_by: User | None,
    project: Project | None,
    label: str,
    retry_of: Job | None,
    celery_task_id: str = "",
) -> Job:
    spec = job_kind(kind)
    job = Job(
        kind=kind,
        label=label or spec.label,
        params=params,
        project=project,
        created_by=created_by,
        queue=spec.queue,
        retry_of=retry_of,
        celery_task_id=celery_task_id,
    )
    # The fields only (label length, JSON params): the related rows were just read from
    # the database, and a new queued job meets the state constraints, which the database
    # enforces anyway; checking them here cost a query and a savepoint each, on every
    # caption submit (active learning's captions_flag job).
    job.full_clean(
        exclude=["project", "created_by", "retry_of"],
        validate_unique=False,
        validate_constraints=False,
    )
    job.save(force_insert=True)
    return job


def job_enqueue(
    *,
    kind: str,
    params: dict[str, Any],
    created_by: User | None = None,
    project: Project | None = None,
    label: str = "",
    retry_of: Job | None = None,
) -> Job:
    """Creates the job and sends it to its queue once the surrounding transaction commits.
    A broker that is down then does not fail the caller, whose data is stored: the job
    stays queued and the jobs_redispatch sweep sends it once the broker is back."""
    job = _job_save(
        kind=kind,
        params=params,
        created_by=created_by,
        project=project,
        label=label,
        retry_of=retry_of,
        celery_task_id=str(uuid.uuid4()),
    )
    transaction.on_commit(lambda: job_dispatch(job=job), robust=True)
    return job


def job_dispatch(*, job: Job) -> bool:
    """Sends the job's message to its queue and notes when. False (logged) when the broker
    refused it; the job stays queued for jobs_redispatch."""
    from core.tasks import run_job

    try:
        run_job.apply_async(args=(job.pk,), queue=job.queue, task_id=job.celery_task_id)
    except Exception as exc:  # kombu's OperationalError, a timeout, a DNS failure, …
        log.warning(
            "job %s stays queued: sending it to the %s queue failed (%s); the jobs-redispatch "
            "sweep sends it again",
            job.pk,
            job.queue,
            exc,
        )
        return False
    Job.objects.filter(pk=job.pk).update(dispatched_at=timezone.now())
    return True


def jobs_redispatch(*, now: datetime | None = None, limit: int = 500) -> int:
    """Sends again queued jobs whose message never reached the broker (it was down when
    they were stored) once they are JOB_REDISPATCH_SECONDS old; those sent that long ago
    to a queue an idle worker serves (a worker killed holding the message); and those
    sent but still queued after JOB_REDISPATCH_LOST_SECONDS (a broker restarted without
    its data). A duplicate message runs nothing: job_run takes only queued jobs. Returns
    how many went."""
    now = now or timezone.now()
    recently = now - timedelta(seconds=settings.JOB_REDISPATCH_SECONDS)
    never_sent = Q(dispatched_at__isnull=True, created_at__lt=recently)
    # A message a worker took and died holding (kill -9, a lost machine) goes back to its
    # queue only after the broker's visibility timeout (Redis: an hour). A live worker that
    # runs nothing would have taken a job waiting in a queue it serves, so such a job's
    # message is gone.
    busy = Job.objects.filter(state=Job.State.RUNNING).values_list("worker", flat=True)
    idle_queues = {
        queue
        for worker in WorkerHeartbeat.alive(now).exclude(hostname__in=busy)
        for queue in worker.queues.split(",")
        if queue
    }
    taken_and_lost = Q(queue__in=idle_queues, dispatched_at__lt=recently)
    looks_lost = Q(dispatched_at__lt=now - timedelta(seconds=settings.JOB_REDISPATCH_LOST_SECONDS))
    stuck = (
        Job.objects.filter(never_sent | taken_and_lost | looks_lost, state=Job.State.QUEUED)
        .exclude(celery_task_id="")  # job_create's jobs run inline, never through a queue
        .order_by("created_at")[:limit]
    )
    sent = 0
    for job in stuck:
        if not job_dispatch(job=job):
            break  # the broker is still down: the next sweep tries again
        sent += 1
    return sent


def job_run(*, job_id: int, worker: str = "", echo: Callable[[str], None] | None = None) -> Job:
    """Runs a queued job to completion and records the outcome. Idempotent: a job that is
    not queued (delivered twice, cancelled meanwhile) is left as it is, unless its runner
    certainly died (see `_job_start`).

    Ctrl-C (KeyboardInterrupt) records the job cancelled, SIGTERM in a command
    (`stop_on_sigterm`) failed, and both go on up; a runner that lost its job (JobLost)
    returns without writing."""
    job, started = _retrying(
        lambda: _job_start(job_id, worker=worker), what=f"starting job #{job_id}"
    )
    if not started:
        return job
    progress = Progress(job, echo=echo)
    outcome: dict[str, Any]
    interrupted: BaseException | None = None
    with _LeaseKeeper(job):
        try:
            handler = job_kind(job.kind).load()
            result = handler(job=job, progress=progress, **job.params)
        except JobLost:
            log.warning("job %s: execution %s lost the job; stopping", job.pk, job.execution)
            return Job.objects.get(pk=job.pk)
        except JobCancelled:
            outcome = {"state": Job.State.CANCELLED, "error": "Cancelled on request."}
        except Exception as exc:
            if connection_lost(exc):
                requeued = _job_requeue(job, exc)
                if requeued is not None:
                    return requeued
            if isinstance(exc, ValidationError):
                # bad input, which the message names (file and line): a traceback in the
                # log (a command's output) would only hide it; the job keeps one
                log.warning("job %s (%s) refused: %s", job.pk, job.kind, _describe(exc))
            else:
                log.exception("job %s (%s) failed", job.pk, job.kind)
            outcome = {
                "state": Job.State.FAILED,
                "error": _describe(exc),
                "traceback": tb.format_exc(),
            }
        except KeyboardInterrupt as exc:
            outcome = {"state": Job.State.CANCELLED, "error": "Interrupted (Ctrl-C)."}
            interrupted = exc
        except BaseException as exc:  # JobTerminated, SystemExit: record it, then go on up
            outcome = {
                "state": Job.State.FAILED,
                "error": f"The process running it was stopped ({_describe(exc)}).",
                "traceback": tb.format_exc(),
            }
            interrupted = exc
        else:
            outcome = {"state": Job.State.SUCCEEDED, "result": result or {}}
    finished = _job_finish(job, **outcome)
    if interrupted is not None:
        raise interrupted
    return finished


def _job_requeue(job: Job, exc: Exception) -> Job | None:
    """A job whose handler lost its database connection goes back to its queue, when its
    kind is safe to run again and attempts remain (`_may_run_again`), instead of failing:
    running it again gives the same outcome, and a worker takes it once the database is
    back. Returns the row, or None when the job may not run again (it is recorded failed)."""

    def write() -> Job | None:
        with transaction.atomic():
            row = Job.objects.select_for_update().get(pk=job.pk)
            if row.state != Job.State.RUNNING or row.execution != job.execution:
                return row  # swept or taken over meanwhile: not this runner's to end
            if not _may_run_again(row):
                return None
            log.warning("job %s (%s) lost its database connection: %s", job.pk, job.kind, exc)
            reason = f"Its database connection was lost ({_describe(exc)})."
            return _end_lost(row, reason=reason, now=timezone.now())

    return _retrying(write, what=f"queuing job #{job.pk} again")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(exc.messages)
    return str(exc) or type(exc).__name__


def _job_finish(
    job: Job,
    *,
    state: str,
    result: dict[str, Any] | None = None,
    error: str = "",
    traceback: str = "",
) -> Job:
    """running → `state`, only while `job.execution` still holds the job; otherwise the
    outcome is dropped (logged) and the row is returned as it is."""

    def write() -> Job:
        with transaction.atomic():
            row = Job.objects.select_for_update().get(pk=job.pk)
            if row.state != Job.State.RUNNING or row.execution != job.execution:
                log.warning(
                    "job %s: dropping the %s outcome of execution %s; the job is %s (execution %s)",
                    job.pk,
                    state,
                    job.execution,
                    row.state,
                    row.execution or "-",
                )
                return row
            row.state = state
            row.finished_at = timezone.now()
            row.error = error
            row.traceback = traceback
            row.lease_expires_at = None
            if result is not None:
                row.result = result
            if state == Job.State.SUCCEEDED and row.progress_total:
                row.progress_done = row.progress_total
            row.save()
            job_finished.send(sender=Job, job=row)
            return row

    return _retrying(write, what=f"recording job #{job.pk} as {state}")


def job_retry(*, job: Job, user: User) -> Job:
    if not job.can_retry:
        raise ValidationError(f"Job #{job.pk} is {job.state}; only failed or cancelled jobs retry.")
    return job_enqueue(
        kind=job.kind,
        params=job.params,
        created_by=user,
        project=job.project,
        label=job.label,
        retry_of=job,
    )


def job_cancel(*, job: Job) -> Job:
    """A queued job is cancelled at once; a running one stops at its next progress report,
    or at once when its runner is gone (lease ran out: nobody would read the request)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        now = timezone.now()
        if job.state == Job.State.QUEUED or (
            job.state == Job.State.RUNNING and _runner_gone(job, now=now)
        ):
            started = job.state == Job.State.RUNNING
            job.state = Job.State.CANCELLED
            job.finished_at = now
            job.lease_expires_at = None
            job.error = (
                f"Cancelled; {_runner_text(job)} had stopped running it."
                if started
                else "Cancelled before it started."
            )
            job.save()
            job_finished.send(sender=Job, job=job)
        elif job.state == Job.State.RUNNING:
            job.cancel_requested = True
            job.save(update_fields=["cancel_requested", "updated_at"])
        else:
            raise ValidationError(f"Job #{job.pk} already finished ({job.state}).")
    return job


def jobs_fail_lost(*, now: datetime | None = None) -> int:
    """Ends running jobs whose lease ran out: their runner (a worker's pool child, a whole
    worker, a management command) was killed, frozen or cut off from the database for longer
    than JOB_LEASE_SECONDS. A kind safe to run again goes back to its queue (at most
    JOB_MAX_ATTEMPTS executions); any other fails, naming the runner. Returns how many."""
    now = now or timezone.now()
    ended = 0
    for job_id, execution in Job.objects.filter(
        state=Job.State.RUNNING, lease_expires_at__lt=now
    ).values_list("pk", "execution"):
        ended += _job_end_lost(
            job_id,
            execution,
            now=now,
            reason="{runner} stopped renewing its lease while running this job.",
        )
    return ended


def jobs_recover_restarted(*, worker: str, now: datetime | None = None) -> int:
    """At a worker's start: its running jobs left by an earlier process under the same name
    (killed, then restarted) end now rather than when their lease runs out."""
    now = now or timezone.now()
    ended = 0
    for job in Job.objects.filter(state=Job.State.RUNNING, worker=worker).exclude(
        runner_instance=RUNNER_INSTANCE
    ):
        if not _runner_process_gone(job):
            continue  # a process with that pid runs: leave the job to its lease
        ended += _job_end_lost(
            job.pk,
            job.execution,
            now=now,
            reason="{runner} was gone when the worker restarted.",
        )
    return ended


def _job_end_lost(job_id: int, execution: str, *, now: datetime, reason: str) -> bool:
    """`_end_lost` on the job if `execution` still runs it; False when something else
    (its runner finishing after all) changed it first."""

    def write() -> bool:
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job_id)
            if job.state != Job.State.RUNNING or job.execution != execution:
                return False
            text = reason.format(runner=_runner_text(job).capitalize())
            _end_lost(job, reason=text, now=now)
            return True

    return _retrying(write, what=f"ending lost job #{job_id}")


@contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """In a command's main thread, turns SIGTERM into JobTerminated, so the running job is
    recorded failed before the process ends (Python's default would end it at once and the
    job would wait for its lease to run out). Leaves any handler already installed (a
    Celery worker's) alone."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(
        signal.SIGTERM
    ) not in (signal.SIG_DFL, None):
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        raise JobTerminated("SIGTERM")

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def job_run_inline(
    *,
    kind: str,
    params: dict[str, Any],
    created_by: User | None = None,
    project: Project | None = None,
    label: str = "",
    echo: Callable[[str], None] | None = None,
) -> Job:
    """Runs a job in this process (management commands): no broker needed, and the job
    still shows on the jobs page like one run by a worker."""
    job = job_create(kind=kind, params=params, created_by=created_by, project=project, label=label)
    with stop_on_sigterm():
        return job_run(job_id=job.pk, echo=echo)
