"""The active-learning panel of the batch page, and reviewers' view of the suggesting
model's caption next to a worker's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template

from active.forms import BatchActiveForm
from active.models import BatchConfig, ClipScore
from active.services.flags import batch_flag_rate
from active.services.suggestions import edit_stats, suggestions_for_review
from core.models import Project

register = template.Library()
SHOWN_SCORES = 50


@register.inclusion_tag("active/_batch_panel.html")
def active_batch_panel(batch: Any, role: str) -> dict[str, Any]:
    config = BatchConfig.objects.filter(batch=batch).select_related("ranked_with").first()
    scores = ClipScore.objects.filter(batch=batch).order_by("rank")
    return {
        "batch": batch,
        "project": batch.project,
        "role": role,
        "config": config,
        "scores": list(scores[:SHOWN_SCORES]),
        "score_count": scores.count(),
        "flag_rate": batch_flag_rate(batch=batch),
        "edits": edit_stats(batch=batch),
        "form": BatchActiveForm(
            initial={
                "strategy": config.strategy if config else "random",
                "presuggest": config.presuggest if config else "blind",
                "seed": config.seed if config else 0,
            }
        ),
    }


@register.simple_tag
def review_suggestions(cards: Iterable[dict[str, Any]], project: Project) -> dict[int, Any]:
    """The promoted run's suggestion for every clip on the review page, in one query."""
    clip_ids = {item["caption"].clip_id for card in cards for item in card["captions"]}
    return suggestions_for_review(clip_ids, project)


@register.filter
def get_item(mapping: dict[Any, Any], key: Any) -> Any:
    return mapping.get(key) if mapping else None
