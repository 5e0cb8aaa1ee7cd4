from __future__ import annotations

from django.contrib import admin

from active.models import (
    BatchConfig,
    CaptionEdit,
    ClipScore,
    CurvePoint,
    FlagCalibration,
    FlagCheck,
    LabelStudioRefusal,
    Presuggestion,
    ProjectConfig,
    PromotionDecision,
    Retrain,
)


@admin.register(ProjectConfig)
class ProjectConfigAdmin(admin.ModelAdmin):
    list_display = ["project", "model_name", "preset", "auto_retrain", "last_retrain_at"]
    exclude = ["labelstudio_secret"]  # rotated from the active-learning page, never shown


@admin.register(BatchConfig)
class BatchConfigAdmin(admin.ModelAdmin):
    list_display = ["batch", "strategy", "presuggest", "ranked_at"]
    list_filter = ["strategy", "presuggest"]
    raw_id_fields = ["batch", "ranked_with"]


@admin.register(ClipScore)
class ClipScoreAdmin(admin.ModelAdmin):
    list_display = ["clip", "batch", "strategy", "score", "rank"]
    list_filter = ["strategy"]
    raw_id_fields = ["batch", "clip"]


@admin.register(Presuggestion)
class PresuggestionAdmin(admin.ModelAdmin):
    list_display = ["assignment", "clip", "text", "shown_at"]
    raw_id_fields = ["assignment", "clip", "suggestion"]


@admin.register(CaptionEdit)
class CaptionEditAdmin(admin.ModelAdmin):
    list_display = ["caption", "word_distance", "char_distance", "created_at"]
    raw_id_fields = ["caption"]


@admin.register(FlagCheck)
class FlagCheckAdmin(admin.ModelAdmin):
    list_display = ["caption", "batch", "kinds", "checked_at"]
    raw_id_fields = ["caption", "batch"]


@admin.register(Retrain)
class RetrainAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "trigger", "approved_captions", "run", "created_at"]
    list_filter = ["trigger", "project"]
    raw_id_fields = ["job", "snapshot", "run"]


@admin.register(PromotionDecision)
class PromotionDecisionAdmin(admin.ModelAdmin):
    list_display = ["run", "incumbent", "metric", "run_score", "incumbent_score", "promoted"]
    list_filter = ["promoted", "project"]
    raw_id_fields = ["run", "incumbent", "retrain", "split_snapshot"]


@admin.register(CurvePoint)
class CurvePointAdmin(admin.ModelAdmin):
    list_display = ["project", "source", "strategy", "round", "captions", "metric", "value"]
    list_filter = ["source", "strategy", "project"]
    raw_id_fields = ["run"]


@admin.register(FlagCalibration)
class FlagCalibrationAdmin(admin.ModelAdmin):
    list_display = ["project", "slope", "intercept", "decisions", "flagged", "created_at"]
    list_filter = ["project"]


@admin.register(LabelStudioRefusal)
class LabelStudioRefusalAdmin(admin.ModelAdmin):
    list_display = ["project", "annotation", "clip_id", "reason", "created_at"]
    list_filter = ["project"]
