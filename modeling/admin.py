from __future__ import annotations

from django.contrib import admin

from modeling.models import Suggestion, TrainingRun


@admin.register(TrainingRun)
class TrainingRunAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "model_name", "state", "best_score", "created_at"]
    list_filter = ["state", "model_name", "project"]
    raw_id_fields = ["snapshot", "job", "created_by"]
    # written by the training job: what the run did, kept as it happened
    readonly_fields = ["learning_curve", "history", "metrics", "metrics_unavailable", "warnings"]


@admin.register(Suggestion)
class SuggestionAdmin(admin.ModelAdmin):
    list_display = ["clip", "run", "text", "mean_entropy", "created_at"]
    search_fields = ["text"]
    raw_id_fields = ["run", "clip"]
