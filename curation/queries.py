"""Read-side queries shared by the curation pages and the API: the ontology tree, clip
counts per AudioSet list, subsets' fetch state and jobs, and which clips a project sees.

The media rule lives here (`project_clips`): a project sees — and its researchers and
reviewers may play — exactly the clips in its own subsets, and of those only its own and
site-wide ones (Clip's docstring). AudioSet segments are shared rows, one serving every
project that selects it; a local clip belongs to one project, and the services that fill
subsets never put another project's clip into one, so the second condition only guards
against a subset filled some other way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404

from core.models import Job, Project
from curation.models import Clip, Label, LabelCuration, LabelSourceCount, Subset, SubsetClip

SEGMENT_LISTS = tuple(Clip.SegmentList.values)  # balanced, eval, unbalanced
SUBSET_JOB_KINDS = ("subset_build", "clips_fetch")


# Ontology -------------------------------------------------------------------------------


def label_clip_counts() -> dict[int, dict[str, int]]:
    """Clips per label and AudioSet list ("local" for local files), read from the cache
    that imports keep (LabelSourceCount): one small query instead of a GROUP BY over
    every clip-label link."""
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    rows = LabelSourceCount.objects.values_list("label_id", "segment_list", "clips")
    for label_id, segment_list, n in rows:
        counts[label_id][segment_list or "local"] = n
    return counts


@dataclass
class TreeRow:
    """One step of a depth-first walk, rendered flat: "node" opens a label's <details>,
    "close" ends it, "dup" points at a label already shown under another parent (the
    ontology is a DAG; repeating whole subtrees would double the page and its anchors)."""

    kind: str
    label: Label | None = None
    depth: int = 0
    has_children: bool = False
    open: bool = False
    match: bool = False
    focus: bool = False  # the label just curated: its form is shown open
    counts: list[int] = field(default_factory=list)
    curation: LabelCuration | None = None  # the project's flags and note, if it judged it


@dataclass
class OntologyTree:
    rows: list[TreeRow]
    labels: int
    matches: int | None  # None when not searching


def ontology_tree(*, project: Project, q: str = "", focus: int | None = None) -> OntologyTree:
    """The whole ontology from two queries (labels, edges) plus the counts aggregate, with
    `project`'s curation of each label. With `q`, only labels whose name contains it and
    their ancestors remain, opened."""
    labels = {
        label.pk: label
        for label in Label.objects.select_related("word_label").prefetch_related(
            "word_label__extra_categories"
        )
    }
    curations = {c.label_id: c for c in LabelCuration.objects.filter(project=project)}
    children, parents = _label_edges()
    needle = q.strip().lower()
    matched = {pk for pk, label in labels.items() if needle in label.name.lower()}
    opened = _ancestors(matched, parents) if needle else set()
    if focus in labels:
        opened |= _ancestors([focus], parents) | {focus}
    visible = (matched | _ancestors(matched, parents)) if needle else set(labels)
    counts = label_clip_counts()
    rows: list[TreeRow] = []
    seen: set[int] = set()

    def walk(pk: int, depth: int) -> None:
        label = labels[pk]
        if pk in seen:
            rows.append(TreeRow("dup", label, depth))
            return
        seen.add(pk)
        kids = [c for c in children[pk] if c in visible]
        per_list = counts.get(pk, {})
        rows.append(
            TreeRow(
                "node",
                label,
                depth,
                has_children=bool(kids),
                open=pk in opened,
                match=bool(needle) and pk in matched,
                focus=pk == focus,
                counts=[per_list.get(s, 0) for s in SEGMENT_LISTS],
                curation=curations.get(pk),
            )
        )
        for child in kids:
            walk(child, depth + 1)
        rows.append(TreeRow("close", depth=depth))

    for root in sorted(pk for pk in visible if not parents[pk]):
        walk(root, 0)
    return OntologyTree(rows, len(labels), len(matched) if needle else None)


def _label_edges() -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Children and parents of every label, from one query. Edge ids follow the ontology
    file's child order, so the tree reads like AudioSet's."""
    children: dict[int, list[int]] = defaultdict(list)
    parents: dict[int, list[int]] = defaultdict(list)
    edges = Label.children.through.objects.order_by("pk")
    for parent, child in edges.values_list("from_label_id", "to_label_id"):
        children[parent].append(child)
        parents[child].append(parent)
    return children, parents


def _ancestors(pks: Iterable[int], parents: dict[int, list[int]]) -> set[int]:
    found: set[int] = set()
    stack = [p for pk in pks for p in parents[pk]]
    while stack:
        pk = stack.pop()
        if pk not in found:
            found.add(pk)
            stack.extend(parents[pk])
    return found


def find_label(key: str) -> Label | None:
    """A label by AudioSet id or (case-insensitive) name."""
    key = key.strip()
    return Label.objects.filter(Q(mid=key) | Q(name__iexact=key)).order_by("pk").first()


# Subsets and clips ------------------------------------------------------------------------


def subset_status_counts(subset: Subset) -> dict[str, Any]:
    """Clips per fetch status (every status present, 0 when none), total, percent ready,
    and how many failed clips used up their attempts (a plain fetch skips those)."""
    exhausted = Count("pk", filter=Q(clip__fetch_attempts__gte=settings.FETCH_MAX_ATTEMPTS))
    rows = list(
        SubsetClip.objects.filter(subset=subset)
        .values("clip__status")
        .annotate(n=Count("pk"), exhausted=exhausted)
        .order_by()
    )
    by_status = {status: 0 for status in Clip.Status.values}
    by_status.update({row["clip__status"]: row["n"] for row in rows})
    total = sum(by_status.values())
    ready = by_status[Clip.Status.READY]
    failed = [row for row in rows if row["clip__status"] == Clip.Status.FAILED]
    return {
        "statuses": by_status,
        "total": total,
        "percent_ready": round(100 * ready / total) if total else 0,
        "exhausted": failed[0]["exhausted"] if failed else 0,
    }


def subset_clip_counts(subsets: Iterable[Subset]) -> dict[int, tuple[int, int]]:
    """(clips, ready clips) per subset, from one aggregate over the links: annotating the
    subsets instead would GROUP BY their large report columns."""
    rows = (
        SubsetClip.objects.filter(subset__in=list(subsets))
        .values("subset_id")
        .annotate(n=Count("pk"), ready=Count("pk", filter=Q(clip__status=Clip.Status.READY)))
        .order_by()
    )
    return {row["subset_id"]: (row["n"], row["ready"]) for row in rows}


def subset_jobs(subset: Subset, *, limit: int = 5) -> QuerySet[Job]:
    """The latest builds that produced this subset and fetches of its clips."""
    return Job.objects.filter(project=subset.project).filter(
        Q(kind="clips_fetch", params__subset_id=subset.pk)
        | Q(kind="subset_build", result__subset=subset.slug)
    )[:limit]


def project_clips(
    project: Project,
    *,
    subset: Subset | None = None,
    split: str = "",
    status: str = "",
    label: Label | None = None,
    q: str = "",
) -> QuerySet[Clip]:
    """The clips of the project's subsets (see the module's media rule), filtered."""
    links = SubsetClip.objects.filter(subset__project=project)
    if subset is not None:
        links = links.filter(subset=subset)
    if split:
        links = links.filter(split=split)
    clips = Clip.objects.filter(Clip.reachable_by(project), pk__in=links.values("clip_id"))
    if status:
        clips = clips.filter(status=status)
    if label is not None:
        clips = clips.filter(labels=label)
    if q.strip():
        clips = clips.filter(
            Q(youtube_id__icontains=q.strip()) | Q(original_name__icontains=q.strip())
        )
    return clips.order_by("pk")


def project_clip(project: Project, pk: int) -> Clip:
    """A clip the project may see and play; 404 for any other, existing or not."""
    return get_object_or_404(project_clips(project), pk=pk)


def clip_splits(subset: Subset, clips: Iterable[Clip]) -> dict[int, str]:
    """Split of each of these clips in the subset (one query for a page of clips)."""
    rows = SubsetClip.objects.filter(subset=subset, clip__in=list(clips))
    return dict(rows.values_list("clip_id", "split"))
