"""Batches of HITs, workers' assignments and their captions.

The vocabulary is MTurk's: a researcher publishes a Batch of HITs (Human Intelligence
Tasks), each HIT holds a few clips and wants `max_assignments` workers; a worker's claim on
a HIT is an Assignment, which ends submitted, approved or rejected, or goes back to the
pool when it is returned or expires. `Hit.taken` counts the assignments holding a slot,
and the database refuses to let it pass `max_assignments`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from curation.models import Clip, Split


class Platform(models.TextChoices):
    """Where a batch's workers come from. Each crowd platform is a package in
    annotation/platforms/ (its registry names it); local batches are handed out by
    hit_claim to the project's own annotators."""

    LOCAL = "local", "Earmark (the project's annotators)"
    MTURK = "mturk", "Amazon Mechanical Turk"
    PROLIFIC = "prolific", "Prolific"


class Batch(models.Model):
    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        PUBLISHED = "published", "Published"
        PAUSED = "paused", "Paused"
        FINISHED = "finished", "Finished"

    class Mode(models.TextChoices):
        # Clotho-style "edit" and "score" stages will join here.
        CAPTION = "caption", "Caption"

    # state -> states it may move to
    TRANSITIONS: dict[str, set[str]] = {
        State.DRAFT: {State.PUBLISHED},
        State.PUBLISHED: {State.PAUSED, State.FINISHED},
        State.PAUSED: {State.PUBLISHED, State.FINISHED},
        State.FINISHED: set(),
    }

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="batches")
    subset = models.ForeignKey("curation.Subset", on_delete=models.PROTECT, related_name="batches")
    split = models.CharField(max_length=5, choices=Split.choices)
    name = models.CharField(max_length=200)
    state = models.CharField(max_length=10, choices=State.choices, default=State.DRAFT)
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.CAPTION)
    captions_per_clip = models.PositiveSmallIntegerField()
    clips_per_hit = models.PositiveSmallIntegerField()
    reward_cents = models.PositiveIntegerField(help_text="paid per approved HIT")
    # A preset's rate is per clip (AudioCaps paid 10 cents a clip), but what a worker is
    # promised is per HIT: while `reward_follows_clips`, reward_cents is this rate times
    # clips_per_hit (the constraint below); a reward per HIT typed by hand turns it off and
    # the rate stays, so the batch page can show both figures when they disagree.
    reward_cents_per_clip = models.PositiveIntegerField(
        null=True, blank=True, help_text="the rate per clip the reward per HIT came from, if any"
    )
    reward_follows_clips = models.BooleanField(
        default=False,
        help_text="the reward per HIT is the rate per clip times the clips per HIT "
        "(off: set by hand per HIT)",
    )
    time_allotted = models.DurationField(help_text="how long a worker may hold a HIT")
    lifetime = models.DurationField(help_text="how long after publishing HITs are offered")
    expires_at = models.DateTimeField(null=True, blank=True)
    auto_approve_delay = models.DurationField(default=timedelta(days=3))
    min_words = models.PositiveSmallIntegerField(default=3)
    max_words = models.PositiveSmallIntegerField(default=40)
    # A ceiling on what bonuses may cost for this batch's work (crowd.services.bonus_pay),
    # so a mistake or a misused reviewer account cannot pay out without limit.
    bonus_cap_cents = models.PositiveIntegerField(
        default=100_00, help_text="the most paid in bonuses, all together, for this batch's work"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    # Set when the batch goes to a crowd platform (annotation.platforms); from then on the
    # platform decides who works on it, and hit_claim no longer offers it
    platform = models.CharField(max_length=16, choices=Platform.choices, default=Platform.LOCAL)
    # Platforms that pay by the hour (Prolific) check the reward against it
    estimated_minutes = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="how long one HIT takes a worker, in minutes"
    )

    class Meta:
        verbose_name = "batch"
        verbose_name_plural = "batches"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["draft", "published", "paused", "finished"]),
                name="batch_state_valid",
            ),
            models.CheckConstraint(condition=Q(mode__in=["caption"]), name="batch_mode_valid"),
            models.CheckConstraint(
                condition=Q(platform__in=Platform.values), name="batch_platform_valid"
            ),
            models.CheckConstraint(condition=Q(split__in=Split.values), name="batch_split_valid"),
            models.CheckConstraint(
                condition=Q(captions_per_clip__gte=1, clips_per_hit__gte=1),
                name="batch_sizes_positive",
            ),
            models.CheckConstraint(
                condition=Q(min_words__gte=1, min_words__lte=F("max_words")),
                name="batch_word_limits_ordered",
            ),
            models.CheckConstraint(
                condition=Q(state="draft", published_at__isnull=True, expires_at__isnull=True)
                | (~Q(state="draft") & Q(published_at__isnull=False, expires_at__isnull=False)),
                name="batch_published_has_dates",
            ),
            models.CheckConstraint(
                condition=Q(reward_follows_clips=False)
                | Q(
                    reward_cents_per_clip__isnull=False,
                    reward_cents=F("reward_cents_per_clip") * F("clips_per_hit"),
                ),
                name="batch_reward_follows_clips",
            ),
        ]

    # What a published batch promised its workers: HITs are grouped and priced once, when
    # the batch is created, and an approval books batch.reward_cents (crowd.records), so
    # these never change after publishing (clean() refuses it).
    PAY_FIELDS = ("clips_per_hit", "reward_cents", "reward_cents_per_clip", "reward_follows_clips")

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("batch_detail", args=[self.project.slug, self.pk])

    def clean(self) -> None:
        if self.pk is None:
            return
        promised = (
            Batch.objects.filter(pk=self.pk)
            .exclude(state=self.State.DRAFT)
            .values(*self.PAY_FIELDS)
            .first()
        )
        if promised is None:
            return
        changed = [name for name in self.PAY_FIELDS if getattr(self, name) != promised[name]]
        if changed:
            message = (
                f"Batch {self.name!r} is published: its workers were promised "
                f"{promised['reward_cents']}¢ per HIT of {_clips(promised['clips_per_hit'])}, "
                "which cannot change; publish a new batch to pay differently."
            )
            raise ValidationError({name: message for name in changed})

    @property
    def reward_from_rate(self) -> int | None:
        """What a HIT would pay at the rate per clip; None without a rate."""
        if self.reward_cents_per_clip is None:
            return None
        return self.reward_cents_per_clip * self.clips_per_hit

    def is_open(self, now: datetime | None = None) -> bool:
        """Whether workers may claim HITs of this batch now."""
        now = now or timezone.now()
        return self.state == self.State.PUBLISHED and bool(
            self.expires_at and self.expires_at > now
        )

    def move_to(self, state: str, *, now: datetime | None = None) -> None:
        if state not in self.TRANSITIONS[self.state]:
            raise ValidationError(
                f"A {self.get_state_display().lower()} batch cannot become {state}."
            )
        if self.state == self.State.DRAFT:
            self.published_at = now or timezone.now()
            self.expires_at = self.published_at + self.lifetime
        self.state = state
        self.save(update_fields=["state", "published_at", "expires_at"])


def _clips(n: int) -> str:
    return f"{n} clip" if n == 1 else f"{n} clips"


class Hit(models.Model):
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="hits")
    # Higher first; the active-learning issue will fill it from model uncertainty.
    priority = models.FloatField(default=0)
    max_assignments = models.PositiveSmallIntegerField()
    # Assignments holding a slot (accepted, submitted, approved). Changed only with F()
    # under the row lock, so the check constraint below is the last word on over-filling.
    taken = models.PositiveSmallIntegerField(default=0)
    clips: models.ManyToManyField[Clip, HitClip] = models.ManyToManyField(
        "curation.Clip", through="HitClip", related_name="hits"
    )

    class Meta:
        verbose_name = "HIT"
        verbose_name_plural = "HITs"
        ordering = ["-priority", "id"]
        indexes = [
            # hit_claim: open HITs, highest priority first, oldest first among equals
            models.Index(
                fields=["-priority", "id"],
                condition=Q(taken__lt=F("max_assignments")),
                name="hit_open_by_priority",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(taken__gte=0, taken__lte=F("max_assignments")),
                name="hit_taken_within_max",
            ),
            models.CheckConstraint(condition=Q(max_assignments__gte=1), name="hit_wants_someone"),
        ]

    def __str__(self) -> str:
        return f"HIT #{self.pk} of {self.batch}"


class HitClip(models.Model):
    hit = models.ForeignKey(Hit, on_delete=models.CASCADE, related_name="hit_clips")
    clip = models.ForeignKey("curation.Clip", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField()

    class Meta:
        verbose_name = "HIT clip"
        verbose_name_plural = "HIT clips"
        ordering = ["hit", "position"]
        constraints = [
            models.UniqueConstraint(fields=["hit", "clip"], name="hitclip_clip_once"),
            models.UniqueConstraint(fields=["hit", "position"], name="hitclip_position_once"),
        ]

    def __str__(self) -> str:
        return f"{self.clip} in {self.hit}"


class Assignment(models.Model):
    class State(models.TextChoices):
        ACCEPTED = "accepted", "Accepted"
        SUBMITTED = "submitted", "Submitted"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        RETURNED = "returned", "Returned"
        # MTurk calls an assignment whose time allotted ran out "Abandoned"; the local
        # engine writes EXPIRED for that, and ABANDONED is kept for assignments mirrored
        # from MTurk so they keep its state name.
        ABANDONED = "abandoned", "Abandoned"
        EXPIRED = "expired", "Expired"

    # states that hold one of the HIT's slots (Hit.taken counts them)
    HOLDING = (State.ACCEPTED, State.SUBMITTED, State.APPROVED)
    # states that keep the worker off the HIT's clips: a rejected worker does not retry
    BLOCKING = (State.ACCEPTED, State.SUBMITTED, State.APPROVED, State.REJECTED)
    RELEASED = (State.REJECTED, State.RETURNED, State.ABANDONED, State.EXPIRED)
    TRANSITIONS: dict[str, set[str]] = {
        State.ACCEPTED: {State.SUBMITTED, State.RETURNED, State.ABANDONED, State.EXPIRED},
        State.SUBMITTED: {State.APPROVED, State.REJECTED},
    }

    hit = models.ForeignKey(Hit, on_delete=models.CASCADE, related_name="assignments")
    worker = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="assignments"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACCEPTED)
    accepted_at = models.DateTimeField(default=timezone.now)
    deadline = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    feedback = models.TextField(blank=True)

    class Meta:
        ordering = ["-accepted_at", "-id"]
        indexes = [
            # assignments_expire: accepted assignments past their deadline
            models.Index(
                fields=["deadline"], condition=Q(state="accepted"), name="assignment_open_deadline"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    state__in=[
                        "accepted",
                        "submitted",
                        "approved",
                        "rejected",
                        "returned",
                        "abandoned",
                        "expired",
                    ]
                ),
                name="assignment_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(deadline__gt=F("accepted_at")), name="assignment_deadline_after_accept"
            ),
            models.CheckConstraint(
                condition=~Q(state__in=["submitted", "approved", "rejected"])
                | Q(submitted_at__isnull=False),
                name="assignment_submitted_has_time",
            ),
            # A worker comes back to a HIT only after letting go of it (returned, expired).
            models.UniqueConstraint(
                fields=["hit", "worker"],
                condition=Q(state__in=["accepted", "submitted", "approved", "rejected"]),
                name="assignment_once_per_worker_hit",
            ),
            # One HIT at a time per worker; also stops two tabs claiming twice at once.
            models.UniqueConstraint(
                fields=["worker"], condition=Q(state="accepted"), name="assignment_one_open"
            ),
        ]

    def __str__(self) -> str:
        return f"assignment #{self.pk} ({self.state}) of {self.hit}"

    def get_absolute_url(self) -> str:
        return reverse("assignment_detail", args=[self.pk])

    @property
    def worth_opening(self) -> bool:
        """Whether the worker's list links its page: the HIT in progress, or one handed in
        (shown read-only, as submitted); a returned or expired one holds nothing of theirs."""
        return self.state in (
            self.State.ACCEPTED,
            self.State.SUBMITTED,
            self.State.APPROVED,
            self.State.REJECTED,
        )

    def is_late(self, now: datetime | None = None) -> bool:
        return self.deadline <= (now or timezone.now())

    def move_to(self, state: str, *, now: datetime | None = None, feedback: str = "") -> None:
        """One step of the state machine; the caller holds the row lock and, for released
        states, gives the HIT its slot back."""
        if state not in self.TRANSITIONS.get(self.state, set()):
            raise ValidationError(
                f"This assignment is {self.get_state_display().lower()}; it cannot become {state}."
            )
        now = now or timezone.now()
        fields: dict[str, Any] = {"state": state}
        if state == self.State.SUBMITTED:
            fields["submitted_at"] = now
        if state in (self.State.APPROVED, self.State.REJECTED):
            fields["reviewed_at"] = now
            fields["feedback"] = feedback
        if state in self.RELEASED:
            fields["released_at"] = now
        for name, value in fields.items():
            setattr(self, name, value)
        self.save(update_fields=list(fields))


class Caption(models.Model):
    """What a worker wrote for one clip, exactly as typed (after trimming whitespace), or a
    caption imported from an existing corpus. Templates escape it; post-processing stores
    its cleaned versions elsewhere, and a reviewer's correction goes to ``fixed_text`` so
    both versions are kept."""

    MAX_CHARS = 500  # AudioCaps captions average about 9 words; 500 is generous

    class Provenance(models.TextChoices):
        CROWD = "crowd", "Written in a HIT"
        IMPORTED = "imported", "Imported from an existing corpus"

    provenance = models.CharField(
        max_length=10, choices=Provenance.choices, default=Provenance.CROWD
    )
    # null only for imported captions, which no worker wrote here
    assignment = models.ForeignKey(
        Assignment, null=True, blank=True, on_delete=models.CASCADE, related_name="captions"
    )
    clip = models.ForeignKey("curation.Clip", on_delete=models.PROTECT, related_name="captions")
    # the project an imported caption was imported into, and the only one that sees it (an
    # AudioSet clip is shared by every project that selects it); a crowd caption belongs
    # to its batch's project and leaves this empty
    imported_into = models.ForeignKey(
        "core.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="imported_captions",
    )
    text = models.TextField()
    # the id the caption had in the corpus it came from (AudioCaps audiocap_id, Clotho
    # "file_name#n"), so an export gives the same ids back
    external_id = models.CharField(max_length=300, blank=True)
    fixed_text = models.TextField(blank=True, help_text="a reviewer's correction of the text")
    fixed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    fixed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # An imported caption a reviewer has yet to approve (one written in Label Studio, as a
    # crowd caption waits in its submitted assignment); outside the corpus until then.
    # A caption file's captions arrive approved.
    pending_review = models.BooleanField(default=False)

    class Meta:
        ordering = ["assignment", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(pending_review=False) | Q(provenance="imported"),
                name="caption_pending_review_only_if_imported",
            ),
            models.UniqueConstraint(fields=["assignment", "clip"], name="caption_once_per_clip"),
            models.CheckConstraint(
                condition=Q(provenance="crowd", assignment__isnull=False)
                | Q(provenance="imported", assignment__isnull=True),
                name="caption_provenance_matches_assignment",
            ),
            models.CheckConstraint(
                condition=Q(provenance="crowd", imported_into__isnull=True)
                | Q(provenance="imported", imported_into__isnull=False),
                name="caption_imported_into_a_project",
            ),
            models.UniqueConstraint(
                fields=["imported_into", "clip", "external_id"],
                condition=Q(provenance="imported"),
                name="caption_imported_once_per_project",
            ),
        ]

    def __str__(self) -> str:
        return self.text[:60]

    @property
    def current_text(self) -> str:
        """The text as the dataset should use it: the reviewer's fix when there is one."""
        return self.fixed_text or self.text


# The HIT page's log: what the worker did with each clip before writing its caption.


class ClipListen(models.Model):
    """The worker heard a clip of their assignment through to the end once. The caption box
    unlocks from it, so the lock survives a reload or a second device (sessionStorage would
    forget it in a new tab); reviewers may read it as "listened before writing"."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="listens")
    clip = models.ForeignKey("curation.Clip", on_delete=models.PROTECT, related_name="+")
    heard_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["assignment", "heard_at"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "clip"], name="cliplisten_once"),
        ]

    def __str__(self) -> str:
        return f"clip {self.clip_id} heard in assignment #{self.assignment_id}"


class ClipAudioServed(models.Model):
    """The clip's audio was served for this assignment (the HIT page's player, the API, the
    MTurk page or the Prolific page): first at `served_at`, and every byte of it by
    `whole_at`. Nobody can have heard the clip through before the whole file was served nor
    before `earliest_heard_at`, the first serving plus the clip's playing time (and never
    before `whole_at`), so the server refuses a caption for it (and the HIT page's "heard"
    report) until then: the server's own record, not the browser's word. One row per
    assignment and clip, written when the audio is first served and, for a player that
    fetches it in ranges, as the ranges add up, until they cover the file."""

    assignment = models.ForeignKey(
        Assignment, on_delete=models.CASCADE, related_name="audio_served"
    )
    clip = models.ForeignKey("curation.Clip", on_delete=models.PROTECT, related_name="+")
    served_at = models.DateTimeField(default=timezone.now)
    earliest_heard_at = models.DateTimeField()
    # the byte ranges served so far, merged, as [first, last] pairs of a file of
    # `file_bytes` bytes; emptied once they cover it (whole_at)
    file_bytes = models.PositiveBigIntegerField(default=0)
    ranges = models.JSONField(default=list, blank=True)
    whole_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "clip audio served record"
        verbose_name_plural = "clip audio served records"
        ordering = ["assignment", "served_at"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "clip"], name="clipaudioserved_once"),
            models.CheckConstraint(
                condition=Q(earliest_heard_at__gte=models.F("served_at")),
                name="clipaudioserved_heard_after_served",
            ),
            models.CheckConstraint(
                condition=Q(whole_at__isnull=True) | Q(whole_at__lte=models.F("earliest_heard_at")),
                name="clipaudioserved_heard_after_whole",
            ),
        ]

    def __str__(self) -> str:
        return f"clip {self.clip_id} served in assignment #{self.assignment_id}"


class VideoHintView(models.Model):
    """The worker opened a clip's video hint (a last resort: reviewers see it). The first
    opening is kept; the video is served only once this row exists."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="video_hints")
    clip = models.ForeignKey("curation.Clip", on_delete=models.PROTECT, related_name="+")
    opened_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["assignment", "opened_at"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "clip"], name="videohintview_once"),
        ]

    def __str__(self) -> str:
        return f"video hint of clip {self.clip_id} opened in assignment #{self.assignment_id}"


class ClipReport(models.Model):
    """A worker's report that a clip cannot be captioned. Reporting returns the assignment,
    and the engine never offers the clip to that worker again; researchers see reports on
    the batch page."""

    class Problem(models.TextChoices):
        AUDIO_BROKEN = "audio_broken", "The audio is broken, silent or does not play"
        VIDEO_UNAVAILABLE = "video_unavailable", "The video hint is unavailable"

    NOTE_MAX_CHARS = 500

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="reports")
    # the assignment's worker, kept here so a claim can skip reported clips without a join
    worker = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="clip_reports"
    )
    clip = models.ForeignKey("curation.Clip", on_delete=models.PROTECT, related_name="reports")
    problem = models.CharField(max_length=20, choices=Problem.choices)
    note = models.TextField(blank=True, max_length=NOTE_MAX_CHARS)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(problem__in=["audio_broken", "video_unavailable"]),
                name="clipreport_problem_valid",
            ),
            # also serves claimable_hits: the clips this worker reported
            models.UniqueConstraint(fields=["worker", "clip"], name="clipreport_once_per_worker"),
        ]

    def __str__(self) -> str:
        return f"{self.get_problem_display()} (clip {self.clip_id})"


class MTurkWorker(models.Model):
    """The local account standing for one Amazon Mechanical Turk worker (MTurk mode).

    Identity is this row, never the account's name: annotation.platforms.mturk finds a worker by
    `worker_id` (which MTurk confirmed, see mturk_assignment_start) and names new accounts
    `mturk-<WorkerId>` only as a label, a prefix no sign-up form accepts
    (core.usernames)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mturk_worker"
    )
    worker_id = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "MTurk worker"
        constraints = [
            models.CheckConstraint(condition=~Q(worker_id=""), name="mturkworker_has_id"),
        ]

    def __str__(self) -> str:
        return f"MTurk worker {self.worker_id}"


class PlatformRef(models.Model):
    """An Earmark row's id on a crowd platform (annotation.platforms): an MTurk HIT type,
    HIT or assignment, a Prolific study or submission, a participant, a block mirrored
    there. One table for every platform and kind, so a new platform adds rows, not
    columns; `local_id` is the pk of the row of `kind` (a Batch, Hit, Assignment,
    crowd.Qualification, crowd.QualificationAttempt, crowd.Block, or the worker's User)."""

    class Kind(models.TextChoices):
        BATCH = "batch", "batch (MTurk HIT type, Prolific study)"
        HIT = "hit", "HIT"
        ASSIGNMENT = "assignment", "assignment (MTurk assignment, Prolific submission)"
        QUALIFICATION = "qualification", "qualification test (MTurk qualification type)"
        ATTEMPT = "attempt", "qualification attempt (MTurk qualification request)"
        WORKER = "worker", "worker (Prolific participant)"
        BLOCK = "block", "block mirrored on the platform"
        PAYMENT = "payment", "ledger entry paid there (MTurk bonus token, Prolific bonus payment)"
        BLOCKLIST = "blocklist", "project's blocklist there (a Prolific participant group)"

    platform = models.CharField(max_length=16, choices=Platform.choices)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    local_id = models.PositiveBigIntegerField()
    external_id = models.CharField(max_length=255)
    # when the platform named the same worker as the row here (an MTurk submission is
    # provisional until then)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    # when the local decision on the row (a review, a grade) reached the platform
    reported_at = models.DateTimeField(null=True, blank=True)
    # the platform's answer when it last refused the row's call (a bonus not paid yet),
    # shown on the ledger page until a later run gets it through
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(platform__in=[p for p in Platform.values if p != Platform.LOCAL]),
                name="platformref_platform_valid",
            ),
            models.CheckConstraint(
                condition=Q(
                    kind__in=[
                        "batch",
                        "hit",
                        "assignment",
                        "qualification",
                        "attempt",
                        "worker",
                        "block",
                        "payment",
                        "blocklist",
                    ]
                ),
                name="platformref_kind_valid",
            ),
            models.CheckConstraint(condition=~Q(external_id=""), name="platformref_has_id"),
            # one id per row and platform; also serves the lookups by row
            models.UniqueConstraint(
                fields=["platform", "kind", "local_id"], name="platformref_once_per_row"
            ),
            # also serves the lookups by the platform's id (the page's hitId, a submission)
            models.UniqueConstraint(
                fields=["platform", "kind", "external_id"], name="platformref_external_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.local_id} is {self.external_id} on {self.platform}"
