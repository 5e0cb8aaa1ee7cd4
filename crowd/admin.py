from __future__ import annotations

from django.contrib import admin

from crowd.models import (
    BatchRequirements,
    Block,
    Flag,
    LedgerDiscrepancy,
    LedgerEntry,
    Qualification,
    QualificationAnswer,
    QualificationAttempt,
    QualificationClip,
    RequiredLocale,
    Review,
)


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ["assignment", "decision", "reason", "reviewer", "automatic", "created_at"]
    list_filter = ["decision", "reason", "automatic"]
    raw_id_fields = ["assignment", "reviewer"]


@admin.register(Flag)
class FlagAdmin(admin.ModelAdmin):
    list_display = ["caption", "reason", "created_at"]
    raw_id_fields = ["caption"]


class QualificationClipInline(admin.TabularInline):
    model = QualificationClip
    extra = 0
    raw_id_fields = ["clip"]


@admin.register(Qualification)
class QualificationAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "created_at"]
    raw_id_fields = ["created_by"]
    inlines = [QualificationClipInline]


class QualificationAnswerInline(admin.TabularInline):
    model = QualificationAnswer
    extra = 0
    raw_id_fields = ["clip"]


@admin.register(QualificationAttempt)
class QualificationAttemptAdmin(admin.ModelAdmin):
    list_display = ["qualification", "worker", "state", "submitted_at", "reviewed_at"]
    list_filter = ["state"]
    raw_id_fields = ["worker", "reviewer"]
    inlines = [QualificationAnswerInline]


class RequiredLocaleInline(admin.TabularInline):
    model = RequiredLocale
    extra = 0


@admin.register(BatchRequirements)
class BatchRequirementsAdmin(admin.ModelAdmin):
    list_display = ["batch", "min_approval_percent", "min_approved"]
    raw_id_fields = ["batch"]
    inlines = [RequiredLocaleInline]


@admin.register(Block)
class BlockAdmin(admin.ModelAdmin):
    list_display = ["worker", "project", "created_at", "lifted_at"]
    raw_id_fields = ["worker", "blocked_by", "lifted_by"]


@admin.register(LedgerEntry)
class LedgerEntryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "kind", "worker", "project", "batch", "amount_cents"]
    list_filter = ["kind"]
    raw_id_fields = ["worker", "batch", "assignment", "paid_by"]

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False  # money is booked by services, never edited by hand

    def has_delete_permission(self, request: object, obj: object = None) -> bool:
        return False


@admin.register(LedgerDiscrepancy)
class LedgerDiscrepancyAdmin(admin.ModelAdmin):
    list_display = ["project", "platform", "problem", "found_at"]
    list_filter = ["platform", "project"]
    raw_id_fields = ["entry", "assignment"]
