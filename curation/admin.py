from __future__ import annotations

from django.contrib import admin

from curation.models import Clip, Label, LabelCuration


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["name", "mid", "abstract", "blacklisted"]
    list_filter = ["abstract", "blacklisted"]
    search_fields = ["name", "mid", "description"]
    filter_horizontal = ["children"]


@admin.register(LabelCuration)
class LabelCurationAdmin(admin.ModelAdmin):
    list_display = ["label", "project", "needs_visuals", "needs_expertise", "excluded"]
    list_filter = ["project", "excluded", "needs_visuals", "needs_expertise"]
    raw_id_fields = ["label"]


@admin.register(Clip)
class ClipAdmin(admin.ModelAdmin):
    list_display = ["__str__", "source", "project", "status", "duration_seconds", "created_at"]
    list_filter = ["source", "status", "project"]
    search_fields = ["youtube_id", "original_name"]
    raw_id_fields = ["labels", "project"]
    # the list a segment was first imported from; the ontology page's cached counts are
    # kept per list, and curation.signals follows label edits and deletions, not this
    readonly_fields = ["segment_list"]
