"""The active-learning loop's rows: per-project and per-batch settings, the scores that
ordered a batch's HITs, suggestions shown to annotators and how much they edited them,
which captions were checked for flags, retrain triggers, promotion decisions and the
learning-curve points.

The scoring itself is pure (active/scoring.py); active/services/ joins it to these rows.
"""

from __future__ import annotations

import secrets

from django.db import models
from django.db.models import Q
from django.utils import timezone

from active.scoring import STRATEGIES

# annotation.signals.SUBMIT_WRITES_IF: whether an assignment's HIT showed suggestions
# (registered in active.apps; read by the submit hook in active.services.flags)
SUGGESTIONS_SHOWN = "active.suggestions_shown"


class Strategy(models.TextChoices):
    RANDOM = "random", "Random"
    UNCERTAINTY = "uncertainty", "Uncertainty (mean token entropy)"
    MARGIN = "margin", "Uncertainty (beam margin)"
    COMMITTEE = "committee", "Committee disagreement (pairwise CIDEr-D)"
    DIVERSITY = "diversity", "Label-coverage diversity"
    HYBRID = "hybrid", "Uncertainty x label coverage"


assert tuple(Strategy.values) == STRATEGIES


class Presuggest(models.TextChoices):
    # annotators never see model output (no anchoring)
    BLIND = "blind", "Blind: annotators never see model output"
    # Clotho-style: the caption box starts from the model's suggestion
    EDIT = "edit", "Edit: annotators start from the model's suggestion"


def new_labelstudio_secret() -> str:
    return secrets.token_urlsafe(24)


class ProjectConfig(models.Model):
    """How the loop retrains a project's captioner: which model, and when; and the secret
    that authenticates Label Studio's webhook calls for the project."""

    project = models.OneToOneField(
        "core.Project", on_delete=models.CASCADE, related_name="active_config"
    )
    model_name = models.CharField(max_length=40, default="tempatt")
    preset = models.CharField(max_length=20, default="small")
    overrides = models.JSONField(default=list, blank=True)  # key=value strings, as `train`
    auto_retrain = models.BooleanField(default=False)
    # approved captions when the last retrain started (growth is measured from here)
    baseline_captions = models.PositiveIntegerField(default=0)
    last_retrain_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    # Part of the backend URL given to Label Studio: the webhook it creates for a backend
    # (<backend URL>/webhook) sends no credentials, so this path segment is what
    # authenticates it. Shown to the project's researchers; rotating it retires old URLs.
    labelstudio_secret = models.CharField(max_length=64, default=new_labelstudio_secret)

    def __str__(self) -> str:
        return f"active-learning settings of {self.project}"


class BatchConfig(models.Model):
    """How a batch's HITs are ordered and whether annotators see suggestions."""

    batch = models.OneToOneField(
        "annotation.Batch", on_delete=models.CASCADE, related_name="active"
    )
    strategy = models.CharField(max_length=12, choices=Strategy.choices, default=Strategy.RANDOM)
    presuggest = models.CharField(
        max_length=8, choices=Presuggest.choices, default=Presuggest.BLIND
    )
    seed = models.PositiveIntegerField(default=0)  # the random strategy's shuffle
    ranked_at = models.DateTimeField(null=True, blank=True)
    ranked_with = models.ForeignKey(
        "modeling.TrainingRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(strategy__in=list(STRATEGIES)), name="batchconfig_strategy_valid"
            ),
            models.CheckConstraint(
                condition=Q(presuggest__in=["blind", "edit"]), name="batchconfig_presuggest_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.strategy}/{self.presuggest} for {self.batch}"


class ClipScore(models.Model):
    """One clip's score under the batch's strategy when it was last ranked."""

    batch = models.ForeignKey("annotation.Batch", on_delete=models.CASCADE, related_name="+")
    clip = models.ForeignKey("curation.Clip", on_delete=models.CASCADE, related_name="+")
    strategy = models.CharField(max_length=12, choices=Strategy.choices)
    score = models.FloatField(null=True, blank=True)  # None: no model evidence (ranked first)
    priority = models.FloatField()  # (0, 1], 1 for the first pick
    rank = models.PositiveIntegerField()  # 1 = first
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["batch", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "clip"], name="clipscore_once_per_batch"),
            models.CheckConstraint(
                condition=Q(priority__gt=0, priority__lte=1), name="clipscore_priority_range"
            ),
        ]

    def __str__(self) -> str:
        return f"clip {self.clip_id} #{self.rank} in batch {self.batch_id}"


class Presuggestion(models.Model):
    """The suggestion an annotator's caption box started from (edit mode), fixed at the
    first rendering of the HIT so a reload or a new promotion does not change it."""

    assignment = models.ForeignKey(
        "annotation.Assignment", on_delete=models.CASCADE, related_name="presuggestions"
    )
    clip = models.ForeignKey("curation.Clip", on_delete=models.CASCADE, related_name="+")
    suggestion = models.ForeignKey(
        "modeling.Suggestion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    text = models.TextField()
    shown_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assignment", "clip"], name="presuggestion_once"),
        ]

    def __str__(self) -> str:
        return f"suggestion shown for clip {self.clip_id} in assignment #{self.assignment_id}"


class CaptionEdit(models.Model):
    """How far an edit-mode caption moved from the suggestion it started from."""

    caption = models.OneToOneField(
        "annotation.Caption", on_delete=models.CASCADE, related_name="active_edit"
    )
    suggested_text = models.TextField()
    char_distance = models.PositiveIntegerField()  # Levenshtein on characters
    word_distance = models.PositiveIntegerField()  # Levenshtein on lower-cased words
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"caption #{self.caption_id}: {self.word_distance} word edit(s)"


class FlagCheck(models.Model):
    """A caption the disagreement checks have looked at (flagged or not): the
    denominator of the flag rate."""

    caption = models.OneToOneField(
        "annotation.Caption", on_delete=models.CASCADE, related_name="flag_check"
    )
    batch = models.ForeignKey(
        "annotation.Batch", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    kinds = models.JSONField(default=list, blank=True)  # model / consensus / hints that fired
    # the meaning detector's score (active.flagmodel), None where it did not run: with the
    # reviewers' decisions, what a project's calibration is refit on
    score = models.FloatField(null=True, blank=True)
    checked_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # flag rate per batch
            models.Index(fields=["batch"], name="flagcheck_batch"),
        ]

    def __str__(self) -> str:
        return f"caption #{self.caption_id} checked ({', '.join(self.kinds) or 'clean'})"


class FlagCalibration(models.Model):
    """One refit of a project's flag probabilities from its reviewers' decisions (the
    latest is in force), with how the flags did against those decisions: the project page
    plots these over time."""

    project = models.ForeignKey(
        "core.Project", on_delete=models.CASCADE, related_name="flag_calibrations"
    )
    # probability that a caption is bad = sigmoid(slope x detector score + intercept)
    slope = models.FloatField(default=1.0)
    intercept = models.FloatField(default=0.0)
    decisions = models.PositiveIntegerField(default=0)  # checked captions a reviewer decided
    bad = models.PositiveIntegerField(default=0)  # … rejected or corrected by the reviewer
    flagged = models.PositiveIntegerField(default=0)  # … that had a flag
    flagged_bad = models.PositiveIntegerField(default=0)  # … flagged and bad
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(bad__lte=models.F("decisions")), name="flagcal_bad"),
            models.CheckConstraint(
                condition=Q(flagged_bad__lte=models.F("flagged"))
                & Q(flagged_bad__lte=models.F("bad")),
                name="flagcal_flagged_bad",
            ),
        ]
        indexes = [
            # the latest calibration of a project
            models.Index(fields=["project", "-created_at"], name="flagcal_project_latest"),
        ]

    def __str__(self) -> str:
        return f"flag calibration of project #{self.project_id} ({self.decisions} decisions)"

    @property
    def precision(self) -> float | None:
        return self.flagged_bad / self.flagged if self.flagged else None

    @property
    def recall(self) -> float | None:
        return self.flagged_bad / self.bad if self.bad else None


class Retrain(models.Model):
    """One retraining the loop started: why, on which snapshot, which run."""

    class Trigger(models.TextChoices):
        GROWTH = "growth", "Corpus growth"
        MANUAL = "manual", "Started by a researcher"
        LABEL_STUDIO = "label_studio", "Label Studio webhook"

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="retrains")
    trigger = models.CharField(max_length=12, choices=Trigger.choices)
    reason = models.TextField()
    approved_captions = models.PositiveIntegerField()
    job = models.ForeignKey(
        "core.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    snapshot = models.ForeignKey(
        "corpus.Snapshot", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    run = models.ForeignKey(
        "modeling.TrainingRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"retrain #{self.pk} of {self.project} ({self.trigger})"


class PromotionDecision(models.Model):
    """Whether a finished run replaced the project's suggesting model, and why: both
    scored on the same validation split."""

    project = models.ForeignKey(
        "core.Project", on_delete=models.CASCADE, related_name="promotion_decisions"
    )
    run = models.ForeignKey("modeling.TrainingRun", on_delete=models.CASCADE, related_name="+")
    incumbent = models.ForeignKey(
        "modeling.TrainingRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    retrain = models.ForeignKey(
        Retrain, null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    metric = models.CharField(max_length=20, default="CIDEr-D")
    split_snapshot = models.ForeignKey(
        "corpus.Snapshot", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    run_score = models.FloatField(null=True, blank=True)
    incumbent_score = models.FloatField(null=True, blank=True)
    promoted = models.BooleanField()
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"run #{self.run_id} {'promoted' if self.promoted else 'kept out'}"


class CurvePoint(models.Model):
    """Validation score against captions used, for one strategy: from the project's own
    retrains (source live) or an imported simulation (benchmarks/active_learning.py)."""

    class Source(models.TextChoices):
        LIVE = "live", "This project's retrains"
        SIMULATION = "simulation", "Simulation"

    project = models.ForeignKey(
        "core.Project", on_delete=models.CASCADE, related_name="curve_points"
    )
    source = models.CharField(max_length=10, choices=Source.choices)
    strategy = models.CharField(max_length=12)  # a Strategy, or "mixed" for live retrains
    label = models.CharField(max_length=200, blank=True)  # the simulation's name
    round = models.PositiveIntegerField(default=0)
    captions = models.PositiveIntegerField()
    metric = models.CharField(max_length=20, default="CIDEr-D")
    value = models.FloatField()
    run = models.ForeignKey(
        "modeling.TrainingRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["source", "label", "strategy", "captions", "id"]

    def __str__(self) -> str:
        return f"{self.strategy}: {self.metric} {self.value:.3f} at {self.captions} captions"


class LabelStudioRefusal(models.Model):
    """A caption written in Label Studio that Earmark refused (the text gate, a clip not in
    the project, a task naming none): the webhook answers it 400 with the reason, which
    Label Studio logs, and the project's Label Studio section lists the latest ones, so a
    refusal is seen on both sides instead of vanishing in a 201."""

    project = models.ForeignKey(
        "core.Project", on_delete=models.CASCADE, related_name="labelstudio_refusals"
    )
    # Label Studio's ids, as it sent them (bounded to a database integer before storing)
    ls_project = models.BigIntegerField(null=True, blank=True)
    annotation = models.BigIntegerField(null=True, blank=True)
    clip_id = models.BigIntegerField(null=True, blank=True)
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # the section reads a project's latest refusals
        indexes = [models.Index(fields=["project", "-created_at"], name="ls_refusal_latest")]

    def __str__(self) -> str:
        return f"annotation {self.annotation}: {self.reason[:60]}"
