from __future__ import annotations

from django.contrib import admin

from curation.models import (
    Clip,
    Label,
    LabelCuration,
    LabelSourceCount,
    Recipe,
    Subset,
    SubsetClip,
    WordLabel,
    WordLabelExtraCategory,
)


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


class WordLabelExtraCategoryInline(admin.TabularInline):
    model = WordLabelExtraCategory
    extra = 0


@admin.register(WordLabel)
class WordLabelAdmin(admin.ModelAdmin):
    list_display = ["name", "super_category"]
    list_filter = ["super_category"]
    search_fields = ["name"]
    inlines = [WordLabelExtraCategoryInline]


@admin.register(LabelSourceCount)
class LabelSourceCountAdmin(admin.ModelAdmin):
    """The ontology page's cached clip counts per segment list (curation.signals keeps them)."""

    list_display = ["label", "segment_list", "clips"]
    list_filter = ["segment_list"]
    raw_id_fields = ["label"]


@admin.register(Recipe)
class RecipeAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "project", "created_by", "updated_at"]
    list_filter = ["project"]
    search_fields = ["name", "slug"]
    raw_id_fields = ["created_by"]


class SubsetClipInline(admin.TabularInline):
    model = SubsetClip
    extra = 0
    raw_id_fields = ["clip"]


@admin.register(Subset)
class SubsetAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "project", "recipe", "built_at"]
    list_filter = ["project"]
    search_fields = ["name", "slug"]
    raw_id_fields = ["recipe"]
    inlines = [SubsetClipInline]
