from __future__ import annotations

from django.contrib import admin

from corpus.models import CorpusImport, CorpusStatistics, Snapshot


@admin.register(CorpusImport)
class CorpusImportAdmin(admin.ModelAdmin):
    list_display = ["file_name", "project", "format", "split", "rows", "imported_at"]
    list_filter = ["format", "split", "project"]
    raw_id_fields = ["subset", "imported_by"]


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = ["__str__", "project", "version", "format", "text", "state", "created_at"]
    list_filter = ["state", "format", "project"]
    raw_id_fields = ["job", "created_by"]
    # a snapshot is immutable once built: its files and checksums are what was published
    readonly_fields = ["counts", "manifest", "archive", "archive_sha256"]


@admin.register(CorpusStatistics)
class CorpusStatisticsAdmin(admin.ModelAdmin):
    list_display = ["__str__", "project", "snapshot", "computed_at"]
    list_filter = ["project"]
    raw_id_fields = ["snapshot", "job"]
