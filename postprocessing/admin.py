from __future__ import annotations

from django.contrib import admin

from postprocessing.models import ProcessedCaption, VocabularyEntry


@admin.register(ProcessedCaption)
class ProcessedCaptionAdmin(admin.ModelAdmin):
    list_display = ["caption", "final_text", "grammar_status", "grammar_reverted", "processed_at"]
    list_filter = ["grammar_status", "grammar_reverted", "pipeline_version"]
    search_fields = ["source_text", "final_text"]
    raw_id_fields = ["caption", "grammar_reverted_by"]


@admin.register(VocabularyEntry)
class VocabularyEntryAdmin(admin.ModelAdmin):
    list_display = ["token", "project", "count"]
    list_filter = ["project"]
    search_fields = ["token"]
