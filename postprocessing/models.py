"""What post-processing made of each approved caption, and each project's vocabulary.

The raw caption stays in ``annotation.Caption.text`` (a reviewer's fix in ``fixed_text``);
``ProcessedCaption`` keeps the text that went in, the final text, its tokens and training
form, and a record of every step so reviewers can see, and undo, what LanguageTool changed.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class StepStatus(models.TextChoices):
    APPLIED = "applied", "Applied"
    UNCHANGED = "unchanged", "Unchanged"
    SKIPPED = "skipped", "Skipped"


class ProcessedCaption(models.Model):
    caption = models.OneToOneField(
        "annotation.Caption", on_delete=models.CASCADE, related_name="processed"
    )
    # Caption.current_text when processed: a later reviewer fix makes this row stale.
    source_text = models.TextField()
    final_text = models.TextField(help_text="after grammar correction")
    train_text = models.TextField(help_text="lower-case, punctuation removed")
    tokens = models.JSONField(default=list, help_text="spaCy tokens of the final text")
    # one {name, before, after, status, reason[, matches, ignored]} per step, in order
    steps = models.JSONField(default=list)
    # the grammar step's status, kept as a column so "not grammar-checked yet" is a query
    grammar_status = models.CharField(max_length=10, choices=StepStatus.choices)
    grammar_reverted = models.BooleanField(default=False)
    grammar_reverted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    grammar_reverted_at = models.DateTimeField(null=True, blank=True)
    pipeline_version = models.CharField(max_length=100)
    processed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-processed_at", "-id"]
        indexes = [
            # the grammar page of a project: corrections LanguageTool made, newest first
            models.Index(
                fields=["-processed_at"],
                condition=Q(grammar_status="applied"),
                name="processed_grammar_applied",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(grammar_status__in=["applied", "unchanged", "skipped"]),
                name="processed_grammar_status_valid",
            ),
            # a reverted correction leaves the grammar step skipped, with who and when
            models.CheckConstraint(
                condition=Q(grammar_reverted=False)
                | Q(grammar_status="skipped", grammar_reverted_at__isnull=False),
                name="processed_reverted_is_skipped",
            ),
        ]

    def __str__(self) -> str:
        return self.final_text[:60]

    def step(self, name: str) -> dict[str, Any] | None:
        return next((step for step in self.steps if step.get("name") == name), None)

    @property
    def grammar_step(self) -> dict[str, Any] | None:
        return self.step("grammar")

    @property
    def can_revert_grammar(self) -> bool:
        return self.grammar_status == StepStatus.APPLIED and not self.grammar_reverted


class VocabularyEntry(models.Model):
    """How often a token occurs in the training text of a project's approved captions."""

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="vocabulary")
    token = models.CharField(max_length=200)
    count = models.PositiveIntegerField()

    class Meta:
        verbose_name = "vocabulary entry"
        verbose_name_plural = "vocabulary entries"
        ordering = ["-count", "token"]
        constraints = [
            models.UniqueConstraint(fields=["project", "token"], name="vocabulary_token_once"),
            models.CheckConstraint(condition=Q(count__gte=1), name="vocabulary_count_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.token} x{self.count}"
