from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from annotation.models import (
    Assignment,
    Batch,
    Caption,
    ClipAudioServed,
    ClipListen,
    ClipReport,
    Hit,
    HitClip,
    MTurkWorker,
    PlatformRef,
    VideoHintView,
)


@admin.register(Batch)
class BatchAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "split", "state", "captions_per_clip", "published_at"]
    list_filter = ["state", "split"]
    search_fields = ["name"]
    raw_id_fields = ["subset", "created_by"]

    def get_readonly_fields(self, request: HttpRequest, obj: Batch | None = None) -> Any:
        """A published batch's pay is what its workers were promised (Batch.clean refuses a
        change anyway; read-only says so before anyone types)."""
        readonly = super().get_readonly_fields(request, obj)
        if obj is not None and obj.state != Batch.State.DRAFT:
            return [*readonly, *Batch.PAY_FIELDS]
        return readonly


class HitClipInline(admin.TabularInline):
    model = HitClip
    extra = 0
    raw_id_fields = ["clip"]


@admin.register(Hit)
class HitAdmin(admin.ModelAdmin):
    list_display = ["__str__", "priority", "taken", "max_assignments"]
    raw_id_fields = ["batch"]
    inlines = [HitClipInline]


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["__str__", "worker", "state", "accepted_at", "deadline", "submitted_at"]
    list_filter = ["state"]
    raw_id_fields = ["hit", "worker"]


@admin.register(Caption)
class CaptionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "clip", "assignment", "created_at"]
    search_fields = ["text"]
    raw_id_fields = ["assignment", "clip"]


@admin.register(ClipReport)
class ClipReportAdmin(admin.ModelAdmin):
    list_display = ["__str__", "clip", "worker", "assignment", "created_at"]
    list_filter = ["problem"]
    raw_id_fields = ["assignment", "worker", "clip"]


@admin.register(VideoHintView)
class VideoHintViewAdmin(admin.ModelAdmin):
    list_display = ["__str__", "assignment", "clip", "opened_at"]
    raw_id_fields = ["assignment", "clip"]


@admin.register(ClipListen)
class ClipListenAdmin(admin.ModelAdmin):
    list_display = ["__str__", "assignment", "clip", "heard_at"]
    raw_id_fields = ["assignment", "clip"]


@admin.register(MTurkWorker)
class MTurkWorkerAdmin(admin.ModelAdmin):
    list_display = ["worker_id", "user", "created_at"]
    search_fields = ["worker_id", "user__username"]
    raw_id_fields = ["user"]


@admin.register(ClipAudioServed)
class ClipAudioServedAdmin(admin.ModelAdmin):
    list_display = ["__str__", "assignment", "clip", "served_at", "earliest_heard_at"]
    raw_id_fields = ["assignment", "clip"]


@admin.register(PlatformRef)
class PlatformRefAdmin(admin.ModelAdmin):
    list_display = ["platform", "kind", "local_id", "external_id", "confirmed_at", "reported_at"]
    list_filter = ["platform", "kind"]
    search_fields = ["external_id"]
