"""Training runs and the captions their models suggest.

The PyTorch side lives in modeling/ml and knows nothing of these rows; modeling/planning.py
(what a run trains), modeling/services.py (recording and queuing it) and modeling/training.py
(training it) join the two.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone


class TrainingRun(models.Model):
    """One training of one captioner on one snapshot: what it trained on, with which
    settings, where and how long, its learning curve, its scores per split and its
    checkpoint. A resumed run is the same row, trained further; a finished run is never
    trained again, but a new run may start from its checkpoint (`started_from`)."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINISHED = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="runs")
    model_name = models.CharField(max_length=40)
    # the RunConfig (model, vocab, train) and the feature config, as dicts: with the
    # snapshot, everything needed to repeat the run
    config = models.JSONField()
    overrides = models.JSONField(default=list, blank=True)  # the --set key=value strings
    # the paper recipe the run follows and every way it differs from it (scaled, set,
    # adapted), with the recipe's notes (modeling.planning.recipe_record); {} for runs
    # recorded before recipes were
    recipe = models.JSONField(default=dict, blank=True)
    snapshot = models.ForeignKey("corpus.Snapshot", on_delete=models.PROTECT, related_name="runs")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    job = models.ForeignKey(
        "core.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # one row per logged step ({"step", "epoch", "loss", "lr"}) and per validation
    # ({"step", "epoch", "val_loss", "score"}), for the live learning-curve plot
    learning_curve = models.JSONField(default=list, blank=True)
    history = models.JSONField(default=list, blank=True)  # one row per finished epoch
    metrics = models.JSONField(default=dict, blank=True)  # {split: {metric: value or None}}
    metrics_unavailable = models.JSONField(default=dict, blank=True)  # {metric: why}
    best_score = models.FloatField(null=True, blank=True)  # validation CIDEr-D
    steps = models.PositiveIntegerField(default=0)
    stopped = models.CharField(max_length=20, blank=True)  # completed, early_stopping, …
    checkpoint = models.FileField(upload_to="checkpoints/", blank=True)
    device = models.CharField(max_length=100, blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)
    code_version = models.CharField(max_length=100, blank=True)
    error = models.TextField(blank=True)
    # what the run worked around without failing, one sentence each: clips left out
    # because their audio could not be read (set when its data is prepared)
    warnings = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # the run whose model suggests captions for the project (the active-learning loop)
    promoted_at = models.DateTimeField(null=True, blank=True)
    # a finished run whose checkpoint's weights this run starts from (`run_start_from`);
    # kept while such a run exists, which still needs it to train or resume
    started_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.RESTRICT, related_name="continued_by"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["queued", "running", "succeeded", "failed", "cancelled"]),
                name="run_state_valid",
            ),
            models.CheckConstraint(
                condition=~Q(state="succeeded") | ~Q(checkpoint=""),
                name="run_succeeded_has_checkpoint",
            ),
            models.CheckConstraint(
                condition=Q(promoted_at__isnull=True) | Q(state="succeeded"),
                name="run_promoted_only_if_succeeded",
            ),
        ]

    def __str__(self) -> str:
        return f"run #{self.pk} ({self.model_name}, {self.state})"

    def get_absolute_url(self) -> str:
        return reverse("run_detail", args=[self.project.slug, self.pk])

    @property
    def finished(self) -> bool:
        return self.state in self.FINISHED

    def score(self, split: str, metric: str) -> Any:
        return (self.metrics.get(split) or {}).get(metric)

    @property
    def final_beam_size(self) -> int:
        """The beam of its final val/test scores and, by default, of its suggestions (the
        recipe's DecodingConfig.beam_size; 3 for runs recorded before recipes)."""
        return int(self.config.get("run", {}).get("decoding", {}).get("beam_size", 3))

    @property
    def final_decoding(self) -> str:
        """How its final scores were decoded, as pages label them: "beam 3" or "greedy"."""
        return "greedy" if self.final_beam_size == 1 else f"beam {self.final_beam_size}"


class Suggestion(models.Model):
    """A caption a run's model proposes for a clip (beam search), with how sure it was:
    the sequence log-probability and the mean per-token entropy of the best hypothesis,
    and the other hypotheses of the beam."""

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="suggestions")
    clip = models.ForeignKey("curation.Clip", on_delete=models.CASCADE, related_name="suggestions")
    text = models.TextField()
    log_prob = models.FloatField()
    mean_entropy = models.FloatField()
    hypotheses = models.JSONField(default=list)  # [{"text", "log_prob", "score", "entropy"}]
    beam_size = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "clip"]
        constraints = [
            models.UniqueConstraint(fields=["run", "clip"], name="suggestion_once_per_run_clip"),
            models.CheckConstraint(condition=Q(mean_entropy__gte=0), name="suggestion_entropy"),
            models.CheckConstraint(condition=Q(log_prob__lte=0), name="suggestion_log_prob"),
        ]

    def __str__(self) -> str:
        return self.text[:60]

    @property
    def confidence(self) -> float:
        """How sure the model was of this caption, from 0 to 1: exp(-mean token entropy),
        one over the number of words it was choosing between on average (1: certain of
        every word). Pages show it as a percentage."""
        return math.exp(-self.mean_entropy)

    @staticmethod
    def at_least(confidence: float) -> Q:
        """The suggestions whose confidence is at least `confidence` (a database filter)."""
        if confidence <= 0:
            return Q()
        return Q(mean_entropy__lte=-math.log(min(confidence, 1.0)))
