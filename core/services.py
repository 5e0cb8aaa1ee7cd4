"""Workflows for projects, people, invites, API tokens and jobs."""

from __future__ import annotations

import logging
import secrets
import time
import traceback as tb
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, connection, connections, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.text import slugify

from core.jobs import job_kind
from core.models import (
    ApiToken,
    Invite,
    Job,
    Membership,
    Project,
    Role,
    WorkerHeartbeat,
    hash_token,
)

log = logging.getLogger(__name__)


# Projects and people -------------------------------------------------------------------


def project_create(
    *,
    name: str,
    created_by: User,
    description: str = "",
    slug: str = "",
    audio_sample_rate: int = 32_000,
) -> Project:
    slug = slug or slugify(name)[:80]
    if not slug:
        raise ValidationError({"name": "The name needs at least one letter or digit."})
    if Project.objects.filter(slug=slug).exists():
        raise ValidationError({"slug": f"A project with the address {slug!r} already exists."})
    with transaction.atomic():
        project = Project(
            name=name,
            slug=slug,
            description=description,
            created_by=created_by,
            audio_sample_rate=audio_sample_rate,
        )
        project.full_clean()
        project.save()
        membership_add(project=project, user=created_by, role=Role.RESEARCHER)
    return project


def membership_add(
    *, project: Project, user: User, role: str, invite: Invite | None = None
) -> Membership:
    """Adds the user to the project, or changes their role there (core.roles keeps the
    user's role groups in step with every membership save)."""
    membership, _ = Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": role, "invite": invite}
    )
    return membership


def invite_create(
    *,
    project: Project,
    created_by: User,
    role: str = Role.ANNOTATOR,
    expires_in_days: int | None = 30,
    max_uses: int | None = None,
) -> Invite:
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    invite = Invite(
        project=project, created_by=created_by, role=role, expires_at=expires_at, max_uses=max_uses
    )
    invite.full_clean()
    invite.save()
    return invite


def invite_revoke(*, invite: Invite) -> None:
    if invite.revoked_at is None:
        invite.revoked_at = timezone.now()
        invite.save(update_fields=["revoked_at"])


def invite_accept(*, token: str, user: User) -> Membership:
    """Joins the user to the invite's project. An existing member keeps their current role:
    an invite link must not be a way to change roles (researchers do that)."""
    with transaction.atomic():
        invite = Invite.objects.select_for_update().select_related("project").get(token=token)
        reason = invite.unusable_reason()
        if reason:
            raise ValidationError(reason)
        existing = Membership.objects.filter(project=invite.project, user=user).first()
        if existing:
            return existing
        invite.uses = F("uses") + 1
        invite.save(update_fields=["uses"])
        return membership_add(project=invite.project, user=user, role=invite.role, invite=invite)


def api_token_create(
    *,
    user: User,
    name: str,
    expires_at: datetime | None = None,
    read_only: bool = False,
    now: datetime | None = None,
) -> tuple[ApiToken, str]:
    """Returns the token row and the raw key, which is never stored and shown only once.
    `expires_at` (optional) must lie ahead; a `read_only` token may only read."""
    now = now or timezone.now()
    raw = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        user=user,
        name=name,
        key_hash=hash_token(raw),
        key_hint=raw[:10],
        created_at=now,
        expires_at=expires_at,
        read_only=read_only,
    )
    token.full_clean()
    token.save()
    return token, raw


TOKEN_TOUCH_INTERVAL = timedelta(minutes=1)


@dataclass(frozen=True)
class TokenHolder:
    """Who a live token speaks for, and whether it may only read."""

    user: User
    read_only: bool


def api_token_authenticate(*, raw: str) -> TokenHolder | None:
    """The active user a live token (not revoked, not expired) belongs to, or None. One
    query: every API request runs it, and a RawQuerySet skips the ORM's query building
    (≈ 1 ms of Python a call)."""
    user_model = get_user_model()
    users, tokens = user_model._meta.db_table, ApiToken._meta.db_table
    now = timezone.now()
    # To the minute is enough for the tokens page; a script calling in a loop would
    # otherwise write and commit this row on every request. The database compares, with
    # the time adapted as the backend stores it (an extra column of a raw query skips the
    # backend's converters, so reading the time back would need per-backend handling).
    stale_before = connection.ops.adapt_datetimefield_value(now - TOKEN_TOUCH_INTERVAL)
    found = list(
        user_model.objects.raw(
            f"SELECT u.*, t.id AS token_pk, t.read_only AS token_read_only, "
            "(t.last_used_at IS NULL OR t.last_used_at <= %s) AS token_stale "
            f"FROM {users} u JOIN {tokens} t ON t.user_id = u.id "
            "WHERE t.key_hash = %s AND t.revoked_at IS NULL AND u.is_active "
            "AND (t.expires_at IS NULL OR t.expires_at > %s)",
            [stale_before, hash_token(raw), connection.ops.adapt_datetimefield_value(now)],
        )
    )
    if not found:
        return None
    user = found[0]
    # A raw query sets its extra columns as plain instance attributes, undeclared on User.
    token_columns = vars(user)
    if token_columns["token_stale"]:
        ApiToken.objects.filter(pk=token_columns["token_pk"]).update(last_used_at=now)
    # SQLite answers 0/1 for the boolean column
    return TokenHolder(user=user, read_only=bool(token_columns["token_read_only"]))


def api_token_revoke(*, token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


# Jobs ----------------------------------------------------------------------------------


class JobCancelled(Exception):
    pass


class Progress:
    """Reports a running job's progress to the database, at most every `interval` seconds.

    Handlers call `progress(done, total, message)`; a cancel request made on the jobs
    page surfaces here as JobCancelled, so long loops stop at their next report.
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

    def _write(self, **fields: Any) -> bool:
        """Updates the job row and returns whether a cancel was requested.

        A handler inside one long transaction (a segment file import) would hide its
        progress until commit, so on PostgreSQL the write goes through the separate
        PROGRESS_DB connection. That connection cannot see a job row that is itself
        uncommitted, or may fail; then the write falls back to the handler's own connection.
        (Test settings define no PROGRESS_DB: test cases may query only "default".)
        """
        if connection.in_atomic_block and settings.PROGRESS_DB in connections:
            try:
                rows = Job.objects.using(settings.PROGRESS_DB).filter(pk=self.job.pk)
                if rows.update(**fields):
                    return rows.filter(cancel_requested=True).exists()
            except DatabaseError:
                pass
        rows = Job.objects.filter(pk=self.job.pk)
        rows.update(**fields)
        return rows.filter(cancel_requested=True).exists()

    def log(self, line: str) -> None:
        stamp = timezone.now().strftime("%H:%M:%S")
        self.job.log += f"[{stamp}] {line}\n"
        Job.objects.filter(pk=self.job.pk).update(log=self.job.log)
        if self.echo:
            self.echo(line)


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
    """Creates the job and sends it to its queue once the surrounding transaction commits."""
    from core.tasks import run_job

    job = _job_save(
        kind=kind,
        params=params,
        created_by=created_by,
        project=project,
        label=label,
        retry_of=retry_of,
        celery_task_id=str(uuid.uuid4()),
    )
    transaction.on_commit(
        lambda: run_job.apply_async(args=(job.pk,), queue=job.queue, task_id=job.celery_task_id)
    )
    return job


def job_run(*, job_id: int, worker: str = "", echo: Callable[[str], None] | None = None) -> Job:
    """Runs a queued job to completion and records the outcome. Idempotent: a job that is
    not queued (delivered twice, cancelled meanwhile) is left as it is."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.state != Job.State.QUEUED:
            log.info("job %s is %s, not running it", job.pk, job.state)
            return job
        job.state = Job.State.RUNNING
        job.started_at = timezone.now()
        job.worker = worker
        job.save(update_fields=["state", "started_at", "worker", "updated_at"])

    progress = Progress(job, echo=echo)
    try:
        handler = job_kind(job.kind).load()
        result = handler(job=job, progress=progress, **job.params)
    except JobCancelled:
        _job_finish(job, Job.State.CANCELLED, error="Cancelled on request.")
    except Exception as exc:
        log.exception("job %s (%s) failed", job.pk, job.kind)
        _job_finish(job, Job.State.FAILED, error=_describe(exc), traceback=tb.format_exc())
    else:
        _job_finish(job, Job.State.SUCCEEDED, result=result or {})
    return job


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(exc.messages)
    return str(exc) or type(exc).__name__


def _job_finish(
    job: Job,
    state: str,
    *,
    result: dict[str, Any] | None = None,
    error: str = "",
    traceback: str = "",
) -> None:
    job.refresh_from_db()
    job.state = state
    job.finished_at = timezone.now()
    job.error = error
    job.traceback = traceback
    if result is not None:
        job.result = result
    if state == Job.State.SUCCEEDED and job.progress_total:
        job.progress_done = job.progress_total
    job.save()


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
    """A queued job is cancelled at once; a running one stops at its next progress report."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state == Job.State.QUEUED:
            job.state = Job.State.CANCELLED
            job.finished_at = timezone.now()
            job.error = "Cancelled before it started."
            job.save()
        elif job.state == Job.State.RUNNING:
            job.cancel_requested = True
            job.save(update_fields=["cancel_requested", "updated_at"])
        else:
            raise ValidationError(f"Job #{job.pk} already finished ({job.state}).")
    return job


def jobs_fail_lost(*, now: datetime | None = None) -> int:
    """Marks running jobs failed when their worker has stopped sending heartbeats."""
    now = now or timezone.now()
    alive = set(WorkerHeartbeat.alive(now).values_list("hostname", flat=True))
    grace = timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
    lost = 0
    for job in Job.objects.filter(state=Job.State.RUNNING, updated_at__lt=now - grace):
        if not job.worker or job.worker in alive:
            continue  # run inline by a command, or its worker is alive and busy
        _job_finish(
            job,
            Job.State.FAILED,
            error=f"Worker {job.worker} stopped responding while running this job.",
        )
        lost += 1
    return lost


def require_role(project: Project, user: User | AnonymousUser, *roles: str) -> Role:
    """Raises PermissionDenied unless the user holds one of `roles` on the project."""
    role = project.role_of(user)
    if user.is_staff and role is None:
        return Role.RESEARCHER
    if role is None or (roles and role not in roles):
        raise PermissionDenied("You do not have access to this project.")
    return role


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
    return job_run(job_id=job.pk, echo=echo)
