from __future__ import annotations

import hashlib
import secrets
import signal
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import models
from django.db.models import Q
from django.db.models.functions import Cast
from django.db.models.lookups import Regex
from django.urls import reverse
from django.utils import timezone
from django_countries.fields import CountryField

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class Role(models.TextChoices):
    RESEARCHER = "researcher", "Researcher"
    REVIEWER = "reviewer", "Reviewer"
    ANNOTATOR = "annotator", "Annotator"


class SampleRate(models.IntegerChoices):
    KHZ_16 = 16_000, "16 kHz"
    KHZ_22 = 22_050, "22.05 kHz"
    KHZ_32 = 32_000, "32 kHz (ACT, PANNs)"
    KHZ_44 = 44_100, "44.1 kHz (Clotho)"
    KHZ_48 = 48_000, "48 kHz"


class Project(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    members: models.ManyToManyField[User, Membership] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )
    # Clips fetched or imported for this project are decoded to mono WAV at this rate.
    # 32 kHz is ACT's rate; feature extraction resamples for models that want less.
    audio_sample_rate = models.PositiveIntegerField(
        default=32_000, choices=SampleRate.choices, help_text="WAV sample rate of new clips"
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(audio_sample_rate__in=[16_000, 22_050, 32_000, 44_100, 48_000]),
                name="project_sample_rate_valid",
            ),
        ]
        permissions = [
            ("curate_project", "Can curate data, manage members and run jobs"),
            ("review_project", "Can review submitted work"),
            ("annotate_project", "Can do annotation work"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("project_detail", args=[self.slug])

    def role_of(self, user: User | AnonymousUser) -> Role | None:
        if not user.is_authenticated:
            return None
        role = self.membership_set.filter(user=user).values_list("role", flat=True).first()
        return Role(role) if role else None


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=20, choices=Role.choices)
    joined_at = models.DateTimeField(default=timezone.now)
    invite = models.ForeignKey("Invite", null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_once_per_project"),
            models.CheckConstraint(condition=Q(role__in=Role.values), name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} on {self.project}"


def _new_invite_token() -> str:
    return secrets.token_urlsafe(24)


class Invite(models.Model):
    """A link that lets workers join a project with a given role."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invites")
    token = models.CharField(max_length=64, unique=True, default=_new_invite_token)
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.ANNOTATOR)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    max_uses = models.PositiveIntegerField(null=True, blank=True)
    uses = models.PositiveIntegerField(default=0)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(role__in=Role.values), name="invite_role_valid"),
            models.CheckConstraint(
                condition=Q(max_uses__isnull=True) | Q(uses__lte=models.F("max_uses")),
                name="invite_uses_within_max",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} invite to {self.project}"

    def get_absolute_url(self) -> str:
        return reverse("invite_accept", args=[self.token])

    def unusable_reason(self, now: Any = None) -> str | None:
        now = now or timezone.now()
        if self.revoked_at:
            return "This invite link was revoked."
        if self.expires_at and self.expires_at <= now:
            return "This invite link has expired."
        if self.max_uses is not None and self.uses >= self.max_uses:
            return "This invite link has been used as many times as allowed."
        return None


class JobQuerySet(models.QuerySet["Job"]):
    def visible_to(self, user: User) -> JobQuerySet:
        """Jobs of projects where the user is a researcher; staff see everything.
        Site-wide jobs (ontology and segment imports, project None) are staff-only: their
        parameters name server paths and their creators belong to no project."""
        if user.is_staff:
            return self
        researcher_projects = Membership.objects.filter(user=user, role=Role.RESEARCHER)
        return self.filter(project__in=researcher_projects.values("project"))


class Job(models.Model):
    """One long-running piece of work (import, download, post-processing, training, export).

    Celery tasks and management commands both run jobs through core.services.job_run, so
    every job shows up on the jobs page with its state, progress and error.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINISHED_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    kind = models.CharField(max_length=60)
    label = models.CharField(max_length=300)
    params = models.JSONField(default=dict, blank=True)
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    queue = models.CharField(max_length=20, default="default")
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    progress_done = models.PositiveBigIntegerField(default=0)
    progress_total = models.PositiveBigIntegerField(null=True, blank=True)
    progress_message = models.CharField(max_length=300, blank=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    log = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    retry_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries"
    )
    celery_task_id = models.CharField(max_length=64, blank=True)
    # When its message reached the broker; a queued job without one (the broker was down at
    # commit) is sent again by the jobs_redispatch sweep.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)  # Celery node name; "" for commands
    # The current execution: a token new at every start, which each write of its runner
    # names (compare-and-set), so a runner that lost the job (swept while frozen, restarted)
    # can no longer change it. Who runs it: the process's instance id (a Celery worker's,
    # shared by its pool children) and pid, so a restarted worker under the same name knows
    # the job is not its own.
    execution = models.CharField(max_length=32, blank=True)
    runner_instance = models.CharField(max_length=32, blank=True)
    runner_pid = models.PositiveIntegerField(null=True, blank=True)
    # A running job's lease, renewed by its runner every third of JOB_LEASE_SECONDS; the
    # jobs_fail_lost sweep ends jobs whose lease ran out (their runner is gone or frozen).
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)  # executions started
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # the jobs page: newest first, optionally filtered by state
            models.Index(fields=["state", "-created_at"], name="job_state_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["queued", "running", "succeeded", "failed", "cancelled"]),
                name="job_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(
                    state__in=["succeeded", "failed", "cancelled"], finished_at__isnull=False
                )
                | Q(state__in=["queued", "running"], finished_at__isnull=True),
                name="job_finished_iff_final",
            ),
            models.CheckConstraint(
                condition=Q(progress_total__isnull=True)
                | Q(progress_done__lte=models.F("progress_total")),
                name="job_progress_within_total",
            ),
            models.CheckConstraint(
                condition=~Q(state="running")
                | (Q(lease_expires_at__isnull=False) & ~Q(execution="")),
                name="job_running_has_execution_and_lease",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.label}"

    def get_absolute_url(self) -> str:
        return reverse("job_detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.state in self.FINISHED_STATES

    @property
    def can_retry(self) -> bool:
        return self.state in (self.State.FAILED, self.State.CANCELLED)

    @property
    def percent(self) -> int | None:
        if self.state == self.State.SUCCEEDED:
            return 100
        if not self.progress_total:
            return None
        return min(100, round(100 * self.progress_done / self.progress_total))

    @property
    def progress_text(self) -> str:
        """What the job is doing and how far it is, as the job pages and their live updates
        show it: "captioning clips: 12 of 42". Handlers report the stage in the message and
        the count in done/total, so neither repeats the other."""
        if self.progress_total:
            count = f"{self.progress_done:,} of {self.progress_total:,}"
        else:
            count = f"{self.progress_done:,}" if self.progress_done else ""
        return ": ".join(part for part in (self.progress_message, count) if part)

    @property
    def duration(self) -> timedelta | None:
        if not self.started_at:
            return None
        return (self.finished_at or timezone.now()) - self.started_at


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for /api/. Only its SHA-256 is stored; the raw key is shown once.

    A token may expire (refused from `expires_at` on) and may be read-only: its requests
    may only read (GET, HEAD, OPTIONS), so a script that only downloads captions cannot
    change anything if its token leaks."""

    PREFIX = "emk_"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    key_hint = models.CharField(max_length=12)  # first characters, to tell tokens apart
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)  # never, when empty
    read_only = models.BooleanField(default=False)

    class Meta:
        verbose_name = "API token"
        verbose_name_plural = "API tokens"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__isnull=True) | Q(expires_at__gt=models.F("created_at")),
                name="apitoken_expires_after_creation",
                violation_error_message="A token must expire after it is created.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.key_hint}…)"

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())


class Profile(models.Model):
    """What a person says about themselves. `country` (ISO 3166-1 alpha-2) is self-declared
    at sign-up or on the account page, as MTurk's Worker_Locale is the country a worker
    gave MTurk: batches open only to some locales (crowd.BatchRequirements) read it, and
    reviewers see it on their worker pages. Empty: not declared, which no locale admits."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile"
    )
    country = CountryField(blank=True)
    country_declared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(country="")
                | Q(Regex(Cast("country", models.CharField()), r"^[A-Z]{2}$")),
                name="profile_country_is_a_code",
            ),
            models.CheckConstraint(
                condition=Q(country="") | Q(country_declared_at__isnull=False),
                name="profile_country_declared_has_time",
            ),
        ]

    def __str__(self) -> str:
        return f"profile of {self.user}"


class WorkerHeartbeat(models.Model):
    """Written every WORKER_HEARTBEAT_SECONDS by each Celery worker (see core.signals).

    A worker that stops cleanly marks its row stopped; one that dies leaves it to go stale.
    Either way the row stays, so pages can say since when a queue has had no worker."""

    hostname = models.CharField(max_length=200, unique=True)
    queues = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname

    @classmethod
    def alive(cls, now: Any = None) -> models.QuerySet[WorkerHeartbeat]:
        now = now or timezone.now()
        window = timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS)
        return cls.objects.filter(last_seen__gte=now - window, stopped_at__isnull=True)

    def gone_since(self) -> datetime:
        """When a worker that is no longer alive stopped serving its queues: when it said
        it stopped, or else its last heartbeat (it died)."""
        return self.stopped_at or self.last_seen


class ProcessExitQuerySet(models.QuerySet["ProcessExit"]):
    def recent(self, *, hours: float = 24, now: datetime | None = None) -> ProcessExitQuerySet:
        return self.filter(exited_at__gte=(now or timezone.now()) - timedelta(hours=hours))


class ProcessExit(models.Model):
    """A process of `bin/earmark up` (`manage.py runstack`) that ended while the stack was
    running: crashed, killed or exited. Written by the supervisor (core.supervisor) before
    it starts the process again; the jobs page lists the recent ones."""

    program = models.CharField(max_length=40)  # the supervisor's name for it: worker-cpu, web…
    pid = models.PositiveIntegerField()
    # the exit status; negative: killed by that signal (Popen.returncode)
    returncode = models.IntegerField()
    started_at = models.DateTimeField()
    exited_at = models.DateTimeField(default=timezone.now)
    restart_delay = models.FloatField()  # seconds until it was started again (backoff)
    log_tail = models.TextField(blank=True)  # the last lines of its log, for the jobs page

    objects = ProcessExitQuerySet.as_manager()

    class Meta:
        ordering = ["-exited_at"]
        indexes = [
            # the jobs page: exits of the last day, newest first
            models.Index(fields=["-exited_at"], name="process_exit_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.program} (pid {self.pid}) {self.ending}"

    @property
    def ending(self) -> str:
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"killed by {name}"
        return f"exited with code {self.returncode}"


class SweepRun(models.Model):
    """When each periodic sweep (a CELERY_BEAT_SCHEDULE entry) last ran, written by the
    worker that ran it (core.signals); /healthz reports a sweep that fell behind."""

    task = models.CharField(max_length=200, unique=True)  # the Celery task name
    last_run_at = models.DateTimeField(default=timezone.now)
    last_ok = models.BooleanField(default=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["task"]

    def __str__(self) -> str:
        return self.task
