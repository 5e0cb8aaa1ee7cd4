"""Keeps the cached clip counts per label (LabelSourceCount) in step with ORM edits.

Signals are used for this cache only, as Django's own contrib does for its caches: a clip's
labels change through `clip.labels.set()` (local imports, SynthScenes) and through the admin
(editing a clip's labels, deleting clips), and every one of those paths must adjust the
counts in the same transaction. Segment imports write links with raw SQL and call
`services.label_counts_refresh` themselves; `manage.py refresh_label_counts` repairs the
cache after anything else that bypasses the ORM.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet
from django.db.models.signals import m2m_changed, pre_delete
from django.dispatch import receiver

from curation.models import Clip

Link = Clip.labels.through


def _adjust(links: QuerySet[Any], sign: int) -> None:
    from curation.services import label_counts_adjust

    rows = links.values("label_id", "clip__segment_list").annotate(n=Count("pk")).order_by()
    label_counts_adjust(
        changes=[(r["label_id"], r["clip__segment_list"], sign * r["n"]) for r in rows]
    )


@receiver(m2m_changed, sender=Link, dispatch_uid="curation_label_links_changed")
def label_links_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **_: Any
) -> None:
    # Added links are counted after they exist (Django passes only the ids it actually
    # linked); removed ones before they go, since `remove()` passes every id it was given,
    # linked or not.
    if action not in ("post_add", "pre_remove", "pre_clear"):
        return
    own, other = ("label_id", "clip_id") if reverse else ("clip_id", "label_id")
    links = Link.objects.filter(**{own: instance.pk})
    if action != "pre_clear":
        links = links.filter(**{f"{other}__in": pk_set or ()})
    _adjust(links, 1 if action == "post_add" else -1)


@receiver(pre_delete, sender=Clip, dispatch_uid="curation_clip_deleted")
def clip_deleted(sender: Any, instance: Clip, **_: Any) -> None:
    # The deletion removes the links without m2m signals, so count them down while they exist.
    _adjust(Link.objects.filter(clip_id=instance.pk), -1)
