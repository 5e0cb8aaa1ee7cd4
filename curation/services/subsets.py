"""Subsets: selecting clips by a recipe (preview and build), hand-picked subsets, and the
report and bar chart stored with each."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import connection, transaction
from django.utils import timezone
from django.utils.text import slugify

from core.bulk import insert_many
from core.models import Job, Project
from core.progress import ProgressFn, no_progress
from curation import audiocaps
from curation.models import Clip, Label, LabelCuration, Recipe, Subset, SubsetClip, WordLabel
from curation.recipes import (
    FLAGS,
    Candidates,
    RecipeError,
    RecipeSpec,
    Selection,
    gather_groups,
    group_by,
    select_subset,
    skew,
)


def _label_table(project: Project, *, word_label_set: str = "site") -> dict[str, Any]:
    """The ontology as arrays, with `project`'s curation flags (other projects' never count)
    and each label's word and super-categories from `word_label_set`: "site" (the imported
    word labels) or a bundled set (curation.audiocaps.WORD_LABEL_SETS)."""
    rows = list(
        Label.objects.values_list("pk", "mid", "name", "abstract", "blacklisted").order_by("pk")
    )
    curated = {
        row[0]: row[1:]
        for row in LabelCuration.objects.filter(project=project).values_list("label_id", *FLAGS)
    }
    unflagged = (False,) * len(FLAGS)
    flags = [curated.get(r[0], unflagged) for r in rows]
    if word_label_set == "site":
        word_labels = WordLabel.objects.prefetch_related("extra_categories").in_bulk()
        words = {
            pk: (word_labels[word].name, word_labels[word].super_categories)
            for pk, word in Label.objects.filter(word_label__isnull=False).values_list(
                "pk", "word_label_id"
            )
        }
    else:
        bundled = audiocaps.read_word_label_set(word_label_set)
        words = {r[0]: bundled[r[1]] for r in rows if r[1] in bundled}
    return {
        "pk": np.array([r[0] for r in rows], dtype=np.int64),
        "mid": [r[1] for r in rows],
        "name": [r[2] for r in rows],
        "abstract": np.array([r[3] for r in rows], dtype=bool),
        "blacklisted": np.array([r[4] for r in rows], dtype=bool),
        "flags": {f: np.array([row[i] for row in flags], dtype=bool) for i, f in enumerate(FLAGS)},
        "word": [words[r[0]][0] if r[0] in words else "" for r in rows],
        "super_categories": [words[r[0]][1] if r[0] in words else [] for r in rows],
    }


def _subtree_indices(
    table: dict[str, Any], roots: list[str], *, spare_also_outside: bool = False
) -> np.ndarray:
    """Labels inside the subtrees of `roots` (names or ids). With `spare_also_outside`, a
    label that is also reachable from the ontology's top without passing through a root
    (Bell: under Music and Sounds of things) is left out; the roots themselves never are."""
    by_key = {mid: i for i, mid in enumerate(table["mid"])}
    by_key.update({name.lower(): i for i, name in enumerate(table["name"])})
    missing = [r for r in roots if r not in by_key and r.lower() not in by_key]
    if missing:
        raise ValidationError(f"excluded_subtrees: no label named {', '.join(missing)}")
    position = {int(pk): i for i, pk in enumerate(table["pk"])}
    children: dict[int, list[int]] = {}
    has_parent = np.zeros(len(table["pk"]), dtype=bool)
    for parent, child in Label.children.through.objects.values_list("from_label", "to_label"):
        children.setdefault(position[parent], []).append(position[child])
        has_parent[position[child]] = True

    def reach(starts: list[int], *, avoid: set[int]) -> np.ndarray:
        found = np.zeros(len(table["pk"]), dtype=bool)
        stack = [s for s in starts if s not in avoid]
        while stack:
            node = stack.pop()
            if not found[node]:
                found[node] = True
                stack.extend(c for c in children.get(node, []) if c not in avoid)
        return found

    excluded_roots = [by_key[r] if r in by_key else by_key[r.lower()] for r in roots]
    inside = reach(excluded_roots, avoid=set())
    if spare_also_outside:
        tops = np.flatnonzero(~has_parent).tolist()
        inside &= ~reach(tops, avoid=set(excluded_roots))
    return inside


def _candidate_links(segment_lists: list[str], label_position: dict[int, int]) -> Any:
    """(clip ids, link clip index, link label index) of fetchable AudioSet clips."""
    link_table = Clip.labels.through._meta.db_table
    placeholders = ", ".join(["%s"] * len(segment_lists))
    sql = (
        f"SELECT c.id, l.label_id FROM {Clip._meta.db_table} c "
        f"JOIN {link_table} l ON l.clip_id = c.id "
        f"WHERE c.source = %s AND c.status <> %s AND c.segment_list IN ({placeholders})"
    )
    clip_col, label_col = [], []
    with connection.cursor() as cursor:
        cursor.execute(sql, [Clip.Source.YOUTUBE, Clip.Status.UNAVAILABLE, *segment_lists])
        while rows := cursor.fetchmany(200_000):
            block = np.asarray(rows, dtype=np.int64)
            clip_col.append(block[:, 0])
            label_col.append(block[:, 1])
    clips = np.concatenate(clip_col) if clip_col else np.zeros(0, dtype=np.int64)
    labels = np.concatenate(label_col) if label_col else np.zeros(0, dtype=np.int64)
    clip_ids = np.unique(clips)
    lookup = np.zeros(max(label_position, default=0) + 1, dtype=np.int64)
    for pk, i in label_position.items():
        lookup[pk] = i
    return clip_ids, np.searchsorted(clip_ids, clips), lookup[labels]


def _subset_select(
    spec: RecipeSpec,
    *,
    project: Project,
    progress: ProgressFn = no_progress,
    what: str = "Recipe",
) -> tuple[dict[str, Any], Candidates, Selection]:
    """Loads the candidate clips for the spec and selects from them; stores nothing.
    Shared by subset_build and subset_preview, so a preview shows exactly what a build keeps.
    The curation flags the spec excludes by are `project`'s own. The table it returns also
    holds `label_rules`: each rule with the labels it drops, in the order they apply."""
    progress(0, 4, "reading labels")
    table = _label_table(project, word_label_set=spec.word_label_set)
    if len(table["pk"]) == 0:
        raise ValidationError("No ontology loaded; run import_ontology first.")
    excluded = _subtree_indices(
        table,
        spec.excluded_subtrees,
        spare_also_outside=spec.keep_labels_also_outside_excluded_subtrees,
    )
    has_word = np.array([bool(w) for w in table["word"]], dtype=bool)
    if spec.only_word_labels and not has_word.any():
        raise ValidationError(
            f"{what}: only_word_labels keeps no label: this site has no word labels imported "
            "(import some, or choose a bundled word_label_set such as audiocaps)."
        )
    rules: list[tuple[str, np.ndarray]] = []
    if spec.excluded_subtrees:
        rules.append((f"in an excluded subtree ({', '.join(spec.excluded_subtrees)})", excluded))
    if spec.exclude_abstract:
        rules.append(("abstract in the ontology", table["abstract"]))
    if spec.exclude_blacklisted:
        rules.append(("blacklisted in the ontology", table["blacklisted"]))
    for flag in spec.excluded_flags:
        rules.append((f"flagged {flag.replace('_', ' ')} in this project", table["flags"][flag]))
    if spec.only_word_labels:
        rules.append((f"not a word label ({spec.word_label_set})", ~has_word))
    usable = ~excluded
    for _, dropped in rules:
        usable &= ~dropped
    position = {int(pk): i for i, pk in enumerate(table["pk"])}

    progress(1, 4, "reading clips")
    clip_ids, link_clip, link_label = _candidate_links(spec.segment_lists, position)
    candidates = Candidates(clip_ids, link_clip, link_label, usable, excluded, has_word)
    progress(2, 4, f"selecting from {len(clip_ids):,} clips")
    try:
        selection = select_subset(spec, candidates)
    except RecipeError as exc:
        raise ValidationError(f"{what}: {exc}") from None
    too_few = usable & ~selection.kept_labels
    rules.append((f"fewer than {max(spec.min_clips_per_label, 1):,} candidate clips", too_few))
    table["label_rules"] = rules
    return table, candidates, selection


def subset_preview(
    *, project: Project, spec: RecipeSpec | dict[str, Any], top_labels: int = 10
) -> dict[str, Any]:
    """What building this spec would select now — the build's report, with only the
    `top_labels` largest labels — without storing anything. `project` is where the
    preview is asked from; candidates are the shared AudioSet clips, as for builds."""
    try:
        spec = spec if isinstance(spec, RecipeSpec) else RecipeSpec.from_dict(spec)
        spec.validate()
    except (RecipeError, TypeError) as exc:
        raise ValidationError(str(exc)) from None
    table, candidates, selection = _subset_select(spec, project=project, what="Preview")
    report = _subset_report(spec, table, candidates, selection)
    report["labels"] = report["labels"][: max(0, top_labels)]
    return report


def subset_build(
    *, recipe: Recipe, name: str = "", slug: str = "", progress: ProgressFn = no_progress
) -> Subset:
    """Selects clips by the recipe and stores them, split, with a report and a bar chart."""
    try:
        spec = RecipeSpec.from_dict(recipe.spec)
    except (RecipeError, TypeError) as exc:
        raise ValidationError(f"Recipe {recipe.name!r}: {exc}") from None
    table, candidates, selection = _subset_select(
        spec, project=recipe.project, progress=progress, what=f"Recipe {recipe.name!r}"
    )
    report = _subset_report(spec, table, candidates, selection)
    progress(3, 4, f"storing {len(selection.clip_ids):,} clips")
    stamp = timezone.now()
    subset = _subset_store(
        Subset(
            project=recipe.project,
            recipe=recipe,
            name=name or f"{recipe.name} ({stamp:%Y-%m-%d %H:%M})",
            slug=slug or f"{recipe.slug}-{stamp:%Y%m%d-%H%M%S}"[:80],
            spec=spec.to_dict(),
            report=report,
            built_at=stamp,
        ),
        selection,
        _subset_chart(table, selection, title=recipe.name),
    )
    progress(4, 4, "done")
    return subset


def _subset_store(subset: Subset, selection: Selection, chart: bytes) -> Subset:
    with transaction.atomic():
        subset.save()
        # bulk_create of 375k SubsetClip objects took most of a 2 M-clip build's memory
        insert_many(
            SubsetClip._meta.db_table,
            ["subset_id", "clip_id", "split"],
            [
                (subset.pk, int(clip), str(split))
                for clip, split in zip(selection.clip_ids, selection.splits, strict=True)
            ],
        )
        subset.chart.save(f"{subset.slug}.png", ContentFile(chart), save=True)
    return subset


def subset_from_clips(
    *,
    project: Project,
    name: str,
    clip_ids: Iterable[int],
    slug: str = "",
    val_size: float | int = 0,
    test_size: float | int = 0,
    seed: int = 0,
) -> Subset:
    """A hand-picked subset: exactly these clips (local ones too), split by the seed, with
    the same report and chart as a recipe build. The demo uses it for its local clips.
    Only the project's own clips and site-wide ones may go in: another project's clip
    would open its file, labels and video hint to this project."""
    from curation.recipes import _assign_splits  # the split rule recipes use, not a copy

    ids = np.unique(np.fromiter(clip_ids, dtype=np.int64))
    found = Clip.objects.filter(pk__in=ids.tolist())
    if len(ids) != found.count():
        raise ValidationError(f"Subset {name!r}: some of the clips do not exist.")
    if foreign := sorted(found.exclude(Clip.reachable_by(project)).values_list("pk", flat=True)):
        raise ValidationError(
            f"Subset {name!r}: clips {foreign[:20]} belong to another project, not to "
            f"{project.slug!r}."
        )
    table = _label_table(project)
    position = {int(pk): i for i, pk in enumerate(table["pk"])}
    links = np.array(
        Clip.labels.through.objects.filter(clip_id__in=ids.tolist()).values_list(
            "clip_id", "label_id"
        ),
        dtype=np.int64,
    ).reshape(-1, 2)
    link_clip = np.searchsorted(ids, links[:, 0])
    link_label = np.array([position[int(pk)] for pk in links[:, 1]], dtype=np.int64)
    n_labels = len(table["pk"])
    counts = np.bincount(link_label, minlength=n_labels)
    every = np.ones(n_labels, dtype=bool)
    candidates = Candidates(ids, link_clip, link_label, every, ~every, every)
    order = ids[np.random.default_rng(seed).permutation(len(ids))]
    try:
        splits = _assign_splits(len(order), val_size, test_size)
    except RecipeError as exc:
        raise ValidationError(f"Subset {name!r}: {exc}") from None
    selection = Selection(order, splits, counts, counts, counts > 0)
    spec = {"hand_picked": len(ids), "val_size": val_size, "test_size": test_size, "seed": seed}
    report = _subset_report(RecipeSpec(), table, candidates, selection)
    subset = Subset(project=project, name=name, slug=slug or slugify(name)[:80], spec=spec)
    subset.report = report
    return _subset_store(subset, selection, _subset_chart(table, selection, title=name))


def _subset_report(
    spec: RecipeSpec, table: dict[str, Any], data: Candidates, selection: Selection
) -> dict[str, Any]:
    before, after, kept = selection.counts_before, selection.counts_after, selection.kept_labels
    labels = [
        {
            "mid": table["mid"][i],
            "name": table["name"][i],
            "before": int(before[i]),
            "after": int(after[i]),
        }
        for i in np.flatnonzero(kept)
    ]
    labels.sort(key=lambda row: -row["after"])
    chosen = np.isin(data.clip_ids, selection.clip_ids)
    everything = np.ones(len(chosen), dtype=bool)
    splits = {s: int((selection.splits == s).sum()) for s in ("train", "val", "test")}
    return {
        "candidate_clips": len(data.clip_ids),
        "selected_clips": len(selection.clip_ids),
        "labels_considered": int(np.unique(data.link_label).size),
        "labels_kept": int(kept.sum()),
        "label_rules": _label_rules(table, data),
        "splits": splits,
        "captions_per_clip": {s: spec.captions_per_clip(s) for s in ("train", "val", "test")},
        "skew_before": skew(before[kept]),
        "skew_after": skew(after[kept]),
        "word_labels": spec.word_label_set,
        # Figure 8's figure over the kept word labels: on every candidate clip (the lists
        # as they are), then on the selection
        "word_skew_before": skew(_clips_per_word(table, data, everything, kept)),
        "word_skew_after": skew(_clips_per_word(table, data, chosen, kept)),
        "super_categories": _clips_per_category(table, data, chosen, kept),
        "labels": labels,
    }


def _label_rules(table: dict[str, Any], data: Candidates) -> list[dict[str, Any]]:
    """Labels the candidate clips carry, dropped by each rule in turn (a label counts for
    the first rule that drops it)."""
    remaining = np.zeros(len(table["pk"]), dtype=bool)
    remaining[data.link_label] = True
    rows = []
    for rule, dropped in table.get("label_rules", []):
        hit = remaining & dropped
        rows.append({"rule": rule, "dropped": int(hit.sum())})
        remaining &= ~hit
    return rows


def _link_groups(
    groups: list[list[str]], data: Candidates, clips: np.ndarray, kept: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """The distinct (clip, group) pairs (a 2 x N array) of the kept labels of `clips` (bool,
    per candidate), where label i belongs to `groups[i]` (a word label, super-categories),
    and the groups' names, sorted, which the pairs index."""
    names = sorted({g for gs in groups for g in gs})
    index = {g: i for i, g in enumerate(names)}
    pair_label = np.array([i for i, gs in enumerate(groups) for _ in gs], dtype=np.int64)
    pair_group = np.array([index[g] for gs in groups for g in gs], dtype=np.int64)
    mask = clips[data.link_clip] & kept[data.link_label]
    link_clip, link_label = data.link_clip[mask], data.link_label[mask]
    by_label = group_by(pair_label, pair_group, len(groups))
    lengths = by_label[0][link_label + 1] - by_label[0][link_label]
    pairs = np.stack([np.repeat(link_clip, lengths), gather_groups(by_label, link_label)])
    return np.unique(pairs, axis=1), names


def _clips_per_word(
    table: dict[str, Any], data: Candidates, clips: np.ndarray, kept: np.ndarray
) -> np.ndarray:
    """Clips per word label (AudioCaps' Figure 8 counts), over the kept labels."""
    words = [[w] if w else [] for w in table["word"]]
    pairs, names = _link_groups(words, data, clips, kept)
    return np.bincount(pairs[1], minlength=len(names))


def _clips_per_category(
    table: dict[str, Any], data: Candidates, clips: np.ndarray, kept: np.ndarray
) -> dict[str, int]:
    """Clips per super-category; a label under two groups counts for both. Every category
    of the word labels is listed, zero when no chosen clip carries it."""
    pairs, names = _link_groups(table["super_categories"], data, clips, kept)
    counts = np.bincount(pairs[1], minlength=len(names))
    return {c: int(n) for c, n in zip(names, counts, strict=True)}


def _subset_chart(table: dict[str, Any], selection: Selection, *, title: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    kept = np.flatnonzero(selection.kept_labels)
    order = kept[np.argsort(-selection.counts_after[kept], kind="stable")][:40]
    names = [table["name"][i] for i in order][::-1]
    height = max(2.5, 0.22 * len(names) + 1)
    figure, axes = plt.subplots(figsize=(7, height), dpi=100)
    axes.barh(names, selection.counts_before[order][::-1], color="#d0d7de", label="candidates")
    axes.barh(names, selection.counts_after[order][::-1], color="#1f6feb", label="selected")
    axes.set_xlabel("clips per label")
    axes.set_title(f"{title}: {len(selection.clip_ids):,} clips", fontsize=10)
    axes.tick_params(axis="y", labelsize=7)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def subset_captions_per_clip(*, subset: Subset, split: str) -> int:
    """How many captions a caption batch of the subset's `split` asks for per clip unless
    told otherwise: what its recipe says (AudioCaps: 1 per train clip, 5 per val and test
    clip), and RecipeSpec's defaults (the same) for hand-picked subsets and older builds."""
    value = (subset.spec or {}).get(f"captions_per_{split}_clip")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return RecipeSpec().captions_per_clip(split)


def subset_build_job(
    *, job: Job, progress: ProgressFn, recipe_id: int, name: str = "", slug: str = ""
) -> dict[str, Any]:
    recipe = Recipe.objects.select_related("project").get(pk=recipe_id)
    subset = subset_build(recipe=recipe, name=name, slug=slug, progress=progress)
    report = subset.report
    return {
        "subset": subset.slug,
        "selected_clips": report["selected_clips"],
        "labels_kept": report["labels_kept"],
        "skew_after": report["skew_after"],
    }
