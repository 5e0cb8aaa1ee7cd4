"""Reviews, flags, qualifications, batch requirements, blocks and the money ledger.

The annotation app owns HITs, assignments and captions; this app owns what reviewers and
researchers decide about the people doing them. Rows here are written in the same
transaction as the annotation change they go with (an approval writes its Review and its
reward in one go), so the ledger never disagrees with the assignments.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Cast
from django.db.models.lookups import Regex
from django.urls import reverse
from django.utils import timezone
from django_countries.fields import CountryField

from annotation.models import Platform
from core.models import Role
from curation.models import Clip

# The roles that review a project's work (and manage its workers and money).
REVIEWERS = (Role.RESEARCHER, Role.REVIEWER)


class RejectReason(models.TextChoices):
    """The canned reasons of AudioCaps-style review, each with the feedback a worker reads."""

    TRANSCRIBES_SPEECH = "speech", "Transcribes speech"
    VISUAL_ONLY = "visual", "Visual-only content"
    LIST_OF_HINTS = "hints", "List of hints"
    IMAGINATIVE = "imaginative", "Imaginative"
    WRONG_TENSE = "tense", "Wrong tense"
    OFF_TOPIC = "off_topic", "Off-topic"


# What the worker reads when the reviewer adds nothing of their own.
REASON_FEEDBACK: dict[str, str] = {
    RejectReason.TRANSCRIBES_SPEECH: (
        "Please describe that someone speaks (who, how), not what they say."
    ),
    RejectReason.VISUAL_ONLY: (
        "Please describe only what can be heard; the video hint shows things the audio does not."
    ),
    RejectReason.LIST_OF_HINTS: (
        "Please write one sentence about what you hear, not a list of the word hints."
    ),
    RejectReason.IMAGINATIVE: "Please describe what is audible, without inventing a story.",
    RejectReason.WRONG_TENSE: 'Please write in the present tense ("a dog barks").',
    RejectReason.OFF_TOPIC: "The caption does not describe the sounds of this clip.",
}


class Review(models.Model):
    """The decision on one submitted assignment. An approval without a reviewer is the
    batch's auto-approval."""

    class Decision(models.TextChoices):
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    assignment = models.OneToOneField(
        "annotation.Assignment", on_delete=models.CASCADE, related_name="review"
    )
    decision = models.CharField(max_length=10, choices=Decision.choices)
    reason = models.CharField(max_length=20, choices=RejectReason.choices, blank=True)
    feedback = models.TextField(blank=True)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    automatic = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__in=["approved", "rejected"]), name="review_decision_valid"
            ),
            models.CheckConstraint(
                condition=Q(reason="") | Q(reason__in=RejectReason.values),
                name="review_reason_valid",
            ),
            models.CheckConstraint(
                condition=Q(decision="rejected") | Q(reason=""),
                name="review_approval_has_no_reason",
            ),
            models.CheckConstraint(
                condition=Q(automatic=False) | Q(decision="approved", reviewer__isnull=True),
                name="review_automatic_is_approval",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.decision} {self.assignment}"


class Flag(models.Model):
    """Something that wants a reviewer's eyes on a caption first. The active-learning loop
    writes these (model disagreement, a caption far from the model's); the review queue
    shows flagged assignments before the others."""

    caption = models.ForeignKey(
        "annotation.Caption", on_delete=models.CASCADE, related_name="flags"
    )
    reason = models.CharField(max_length=200)
    evidence = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~Q(reason=""), name="flag_has_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.reason} on caption #{self.caption_id}"


class Qualification(models.Model):
    """A test of a few clips a worker captions once; a reviewer grades the attempt."""

    project = models.ForeignKey(
        "core.Project", on_delete=models.CASCADE, related_name="qualifications"
    )
    name = models.CharField(max_length=200)
    instructions = models.TextField(blank=True)
    min_words = models.PositiveSmallIntegerField(default=3)
    max_words = models.PositiveSmallIntegerField(default=40)
    clips: models.ManyToManyField[Clip, QualificationClip] = models.ManyToManyField(
        "curation.Clip", through="QualificationClip", related_name="qualifications"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="qualification_name_once"),
            models.CheckConstraint(
                condition=Q(min_words__gte=1, min_words__lte=F("max_words")),
                name="qualification_word_limits_ordered",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("qualification_detail", args=[self.project.slug, self.pk])


class QualificationClip(models.Model):
    qualification = models.ForeignKey(Qualification, on_delete=models.CASCADE, related_name="items")
    clip = models.ForeignKey("curation.Clip", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField()
    # shown to reviewers next to the worker's caption, never to workers
    gold_caption = models.TextField(blank=True)

    class Meta:
        ordering = ["qualification", "position"]
        constraints = [
            models.UniqueConstraint(fields=["qualification", "clip"], name="qualclip_clip_once"),
            models.UniqueConstraint(
                fields=["qualification", "position"], name="qualclip_position_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.clip} in {self.qualification}"


class QualificationAttempt(models.Model):
    class State(models.TextChoices):
        SUBMITTED = "submitted", "Waiting for review"
        APPROVED = "approved", "Passed"
        REJECTED = "rejected", "Not passed"

    qualification = models.ForeignKey(
        Qualification, on_delete=models.CASCADE, related_name="attempts"
    )
    worker = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="qualification_attempts"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.SUBMITTED)
    submitted_at = models.DateTimeField(default=timezone.now)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    feedback = models.TextField(blank=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            # the claim gate: qualifications a worker has passed
            models.Index(
                fields=["worker", "qualification"],
                condition=Q(state="approved"),
                name="qualattempt_passed",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["submitted", "approved", "rejected"]),
                name="qualattempt_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(state="submitted", reviewed_at__isnull=True)
                | Q(state__in=["approved", "rejected"], reviewed_at__isnull=False),
                name="qualattempt_reviewed_has_time",
            ),
            # one attempt in review or passed; a worker who did not pass may try again
            models.UniqueConstraint(
                fields=["qualification", "worker"],
                condition=Q(state__in=["submitted", "approved"]),
                name="qualattempt_one_live",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.worker} on {self.qualification} ({self.state})"

    def get_absolute_url(self) -> str:
        return reverse("attempt_detail", args=[self.qualification.project.slug, self.pk])


class QualificationAnswer(models.Model):
    attempt = models.ForeignKey(
        QualificationAttempt, on_delete=models.CASCADE, related_name="answers"
    )
    clip = models.ForeignKey("curation.Clip", on_delete=models.PROTECT, related_name="+")
    text = models.TextField()

    class Meta:
        ordering = ["attempt", "id"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "clip"], name="qualanswer_once_per_clip"),
        ]

    def __str__(self) -> str:
        return self.text[:60]


class BatchRequirements(models.Model):
    """What a worker needs before hit_claim offers them this batch's HITs (AudioCaps asked
    for at least 95 % approved, more than 1,000 approved HITs and a locale in AU, CA, GB,
    NZ or US: annotation.presets' "AudioCaps crowd"). The locales (RequiredLocale rows)
    are the countries workers declared on their profile (core.Profile). The rate and
    count are the worker's record in the batch's project, so other projects' reviewers
    cannot lock a worker out here; `site_wide_record` opts into the record over every
    project, as MTurk's system qualifications count."""

    batch = models.OneToOneField(
        "annotation.Batch", on_delete=models.CASCADE, related_name="requirements"
    )
    qualifications = models.ManyToManyField(
        Qualification, blank=True, related_name="batch_requirements"
    )
    # percent of the worker's reviewed assignments that were approved; 0 = no minimum.
    # A worker with nothing reviewed yet counts as 100 %, as on MTurk.
    min_approval_percent = models.PositiveSmallIntegerField(default=0)
    min_approved = models.PositiveIntegerField(default=0)
    site_wide_record = models.BooleanField(
        default=False,
        help_text="Count the worker's reviewed assignments in every project, not only this one.",
    )

    class Meta:
        verbose_name_plural = "batch requirements"
        constraints = [
            models.CheckConstraint(
                condition=Q(min_approval_percent__lte=100), name="batchreq_percent_at_most_100"
            ),
        ]

    def __str__(self) -> str:
        return f"requirements of {self.batch}"


class RequiredLocale(models.Model):
    """A country a batch's workers must have declared: with any of these rows, a worker
    whose profile names another country, or none, is not offered the batch's HITs. In
    MTurk mode they become MTurk's Worker_Locale requirement."""

    requirements = models.ForeignKey(
        BatchRequirements, on_delete=models.CASCADE, related_name="locales"
    )
    country = CountryField()

    class Meta:
        ordering = ["requirements", "country"]
        constraints = [
            models.UniqueConstraint(fields=["requirements", "country"], name="reqlocale_once"),
            models.CheckConstraint(
                condition=Q(Regex(Cast("country", models.CharField()), r"^[A-Z]{2}$")),
                name="reqlocale_country_is_a_code",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.country} for {self.requirements}"


class BlockQuerySet(models.QuerySet["Block"]):
    def active(self) -> BlockQuerySet:
        return self.filter(lifted_at__isnull=True)


class Block(models.Model):
    """A worker barred from a project's HITs, with the reason they are shown. Lifting a
    block keeps the row, so the worker page shows the history."""

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="blocks")
    worker = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="blocks"
    )
    reason = models.TextField()
    blocked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    lift_reason = models.TextField(blank=True)

    objects = BlockQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["worker", "project"],
                condition=Q(lifted_at__isnull=True),
                name="block_one_active",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="block_has_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.worker} blocked on {self.project}"


class LedgerEntry(models.Model):
    """Money owed to a worker: the batch's reward for each approved assignment, written
    with the approval, and bonuses, each paid once per idempotency key."""

    class Kind(models.TextChoices):
        REWARD = "reward", "Reward"
        BONUS = "bonus", "Bonus"

    kind = models.CharField(max_length=10, choices=Kind.choices)
    project = models.ForeignKey("core.Project", on_delete=models.PROTECT, related_name="+")
    worker = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="ledger_entries"
    )
    batch = models.ForeignKey(
        "annotation.Batch",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="ledger_entries",
    )
    assignment = models.ForeignKey(
        "annotation.Assignment",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="ledger_entries",
    )
    amount_cents = models.PositiveIntegerField()
    reason = models.TextField(blank=True)
    paid_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # One ledger across platforms: who paid (the batch's platform when the entry was
    # written) and in which currency (annotation.platforms.platform_currency)
    platform = models.CharField(max_length=16, choices=Platform.choices, default=Platform.LOCAL)
    currency = models.CharField(max_length=3, default="USD")
    idempotency_key = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "ledger entries"
        indexes = [
            # worker pages and the ledger's per-worker totals within a project
            models.Index(fields=["project", "worker"], name="ledger_project_worker"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["reward", "bonus"]), name="ledger_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(
                    kind="reward",
                    assignment__isnull=False,
                    batch__isnull=False,
                    idempotency_key="",
                )
                | Q(kind="bonus", amount_cents__gt=0) & ~Q(reason="") & ~Q(idempotency_key=""),
                name="ledger_entry_complete",
            ),
            models.UniqueConstraint(
                fields=["assignment"], condition=Q(kind="reward"), name="ledger_reward_once"
            ),
            models.UniqueConstraint(
                fields=["idempotency_key"], condition=Q(kind="bonus"), name="ledger_bonus_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of {self.amount_cents}¢ to {self.worker}"


class LedgerDiscrepancy(models.Model):
    """A difference between the ledger and a crowd platform's own records, found by the
    platform's periodic reconciliation (annotation.platforms) and listed on the ledger
    page. Each run replaces the platform's open rows with what it finds now."""

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="+")
    platform = models.CharField(max_length=16, choices=Platform.choices)
    entry = models.ForeignKey(
        LedgerEntry, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    assignment = models.ForeignKey(
        "annotation.Assignment", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    problem = models.TextField()
    found_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-found_at", "-id"]
        verbose_name_plural = "ledger discrepancies"
        constraints = [
            models.CheckConstraint(condition=~Q(problem=""), name="discrepancy_says_what"),
        ]

    def __str__(self) -> str:
        return f"{self.platform}: {self.problem}"
