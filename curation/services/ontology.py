"""AudioSet's ontology in the database: importing ontology.json, a researcher's curation
of labels, the cached clip counts per label, and the hint words labels map to."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction

from core.encodings import SNIFF_BYTES, utf16_refusal
from core.models import Job, Project
from core.progress import ProgressFn, no_progress
from curation import audiocaps
from curation.models import (
    Clip,
    Label,
    LabelCuration,
    LabelSourceCount,
    SuperCategory,
    WordLabel,
    WordLabelExtraCategory,
)
from curation.recipes import FLAGS

_LABEL_FIELDS = (
    "name",
    "description",
    "citation_uri",
    "positive_examples",
    "abstract",
    "blacklisted",
)


def _parse_ontology(path: Path) -> list[dict[str, Any]]:
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValidationError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(f"{path.name}: not valid JSON ({exc})") from None
    if not isinstance(entries, list):
        raise ValidationError(f"{path.name}: expected a JSON list of ontology classes")
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"{path.name}: entry {index}"
        if not isinstance(entry, dict):
            raise ValidationError(f"{where}: expected an object, got {type(entry).__name__}")
        mid, name = entry.get("id"), entry.get("name")
        if not isinstance(mid, str) or not mid.strip():
            raise ValidationError(f"{where}: missing 'id'")
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"{where} (id {mid}): missing 'name'")
        if mid in seen:
            raise ValidationError(f"{where}: id {mid} appears twice")
        seen.add(mid)
        restrictions = entry.get("restrictions") or []
        children = entry.get("child_ids") or []
        if not isinstance(children, list) or not isinstance(restrictions, list):
            raise ValidationError(f"{where} (id {mid}): child_ids and restrictions must be lists")
        rows.append(
            {
                "mid": mid,
                "name": name.strip(),
                "description": entry.get("description") or "",
                "citation_uri": entry.get("citation_uri") or "",
                "positive_examples": entry.get("positive_examples") or [],
                "abstract": "abstract" in restrictions,
                "blacklisted": "blacklist" in restrictions,
                "child_ids": children,
            }
        )
    for row in rows:
        unknown = [c for c in row["child_ids"] if c not in seen]
        if unknown:
            raise ValidationError(
                f"{path.name}: {row['mid']} ({row['name']}) lists unknown child ids {unknown}"
            )
    return rows


def _cycle(children: dict[str, list[str]]) -> list[str] | None:
    """A path of ids that comes back to its first one (["/m/a", "/m/b", "/m/a"]) when the
    parent → child links loop, else None. Depth first without recursion: the tree is
    a few levels deep, a hostile file need not be."""
    done: set[str] = set()
    for root in children:
        if root in done:
            continue
        path = [root]
        on_path = {root}
        pending = [iter(children.get(root, []))]
        while pending:
            child = next(pending[-1], None)
            if child is None:
                done.add(path[-1])
                on_path.discard(path.pop())
                pending.pop()
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                path.append(child)
                on_path.add(child)
                pending.append(iter(children.get(child, [])))
    return None


def _refuse_cycles(rows: list[dict[str, Any]], name: str) -> None:
    """ValidationError naming the ids (and names) of a loop in the file's parent/child
    links: the ontology browser and recipes walk the tree from parents to children. The
    file's links are all there is to check: every child a file names is in the file (see
    _parse_ontology), and the import replaces the links of every class it lists, so a
    loop cannot pass through links of classes loaded before."""
    loop = _cycle({row["mid"]: row["child_ids"] for row in rows})
    if loop is None:
        return
    names = {row["mid"]: row["name"] for row in rows}
    shown = " → ".join(f"{mid} ({names[mid]})" for mid in loop)
    raise ValidationError(
        f"{name}: the parent/child links form a cycle: {shown}; a class cannot be its own "
        "ancestor — nothing was imported."
    )


def ontology_import(*, path: Path, progress: ProgressFn = no_progress) -> dict[str, int]:
    """Loads AudioSet's ontology.json. Idempotent: re-running updates changed classes
    and the tree, and reports what changed. Nothing is written if the file is invalid,
    including a tree whose parent/child links loop."""
    rows = _parse_ontology(Path(path))
    _refuse_cycles(rows, Path(path).name)
    total = len(rows)
    created = updated = unchanged = 0
    with transaction.atomic():
        existing = {label.mid: label for label in Label.objects.all()}
        for done, row in enumerate(rows, start=1):
            label = existing.get(row["mid"])
            values = {f: row[f] for f in _LABEL_FIELDS}
            if label is None:
                existing[row["mid"]] = Label.objects.create(mid=row["mid"], **values)
                created += 1
            elif any(getattr(label, f) != v for f, v in values.items()):
                for field, value in values.items():
                    setattr(label, field, value)
                label.save(update_fields=list(_LABEL_FIELDS))
                updated += 1
            else:
                unchanged += 1
            if done % 50 == 0:
                progress(done, total + 1, "classes")
        Edge = Label.children.through
        Edge.objects.filter(from_label__in=[existing[r["mid"]] for r in rows]).delete()
        Edge.objects.bulk_create(
            [
                Edge(from_label_id=existing[r["mid"]].pk, to_label_id=existing[c].pk)
                for r in rows
                for c in r["child_ids"]
            ]
        )
    progress(total + 1, total + 1, "tree linked")
    return {"classes": total, "created": created, "updated": updated, "unchanged": unchanged}


def ontology_import_job(*, job: Job, progress: ProgressFn, path: str) -> dict[str, int]:
    return ontology_import(path=Path(path), progress=progress)


# Label curation -------------------------------------------------------------------------


def label_curate(
    *,
    project: Project,
    label: Label,
    needs_visuals: bool,
    needs_expertise: bool,
    excluded: bool,
    note: str = "",
) -> LabelCuration:
    """Records a researcher's judgement of a label for their project; the project's recipes
    exclude labels by these flags. The shared ontology and other projects are untouched."""
    curation, _ = LabelCuration.objects.update_or_create(
        project=project,
        label=label,
        defaults={
            "needs_visuals": needs_visuals,
            "needs_expertise": needs_expertise,
            "excluded": excluded,
            "note": note.strip(),
        },
    )
    return curation


def label_curations(*, project: Project) -> dict[int, LabelCuration]:
    """The project's curation of each label it judged, by label id."""
    return {c.label_id: c for c in LabelCuration.objects.filter(project=project)}


def label_flags_apply(*, project: Project, path: Path = audiocaps.FLAG_SET) -> dict[str, int]:
    """Sets the flags of a flag-set CSV (`mid,name,flag,reason`; the bundled one is
    AudioCaps': visual-only and expert-only labels) on the project's curation of each label.
    Only sets flags, never clears one; a label without a note gets the file's reasons as
    its note. Idempotent. All or nothing: a row naming an unknown mid, or a mid whose
    ontology name differs from the file's, is reported with its line and nothing changes."""
    path = Path(path)
    try:
        rows = audiocaps.read_flags(path, known=FLAGS)
    except FileNotFoundError:
        raise ValidationError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise ValidationError(f"{path.name}: not UTF-8 text") from None
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    labels = Label.objects.in_bulk([row.mid for row in rows], field_name="mid")
    flags: dict[int, dict[str, bool]] = {}
    reasons: dict[int, list[str]] = {}
    for row in rows:
        where = f"{path.name}, line {row.line}"
        label = labels.get(row.mid)
        if label is None:
            hint = "" if Label.objects.exists() else " (no ontology loaded: run import_ontology)"
            raise ValidationError(f"{where}: no AudioSet label {row.mid}{hint}")
        if row.name and row.name != label.name:
            raise ValidationError(
                f"{where}: {row.mid} is {label.name!r} in the ontology, not {row.name!r}"
            )
        flags.setdefault(label.pk, {})[row.flag] = True
        if row.reason:
            reasons.setdefault(label.pk, []).append(f"{row.flag.replace('_', ' ')}: {row.reason}")
    changed = 0
    with transaction.atomic():
        existing = {
            c.label_id: c
            for c in LabelCuration.objects.select_for_update().filter(
                project=project, label_id__in=list(flags)
            )
        }
        for label_id, wanted in flags.items():
            curation = existing.get(label_id) or LabelCuration(project=project, label_id=label_id)
            before = (curation.pk, *(getattr(curation, f) for f in FLAGS), curation.note)
            for flag in wanted:
                setattr(curation, flag, True)
            if not curation.note and label_id in reasons:
                curation.note = " ".join(reasons[label_id])
            if before != (curation.pk, *(getattr(curation, f) for f in FLAGS), curation.note):
                curation.save()
                changed += 1
    return {"labels": len(flags), "changed": changed}


def label_flags_applied(*, project: Project, path: Path = audiocaps.FLAG_SET) -> tuple[int, int]:
    """(flags of the file the project's curation has set, flags in the file), for the
    ontology page to say whether the bundled set is applied."""
    rows = audiocaps.read_flags(Path(path), known=FLAGS)
    curations = LabelCuration.objects.filter(
        project=project, label__mid__in=[row.mid for row in rows]
    ).values("label__mid", *FLAGS)
    have = {(c["label__mid"], f) for c in curations for f in FLAGS if c[f]}
    return sum((row.mid, row.flag) in have for row in rows), len(rows)


def word_labels_loaded(*, path: Path = audiocaps.WORD_LABELS) -> tuple[int, int]:
    """(labels of a word-label CSV mapped to its word on this site, labels in the file),
    for the ontology page to say whether a bundled set is imported."""
    with Path(path).open(newline="", encoding="utf-8-sig") as handle:
        wanted = {
            (mid.strip(), row["word"].strip().lower())
            for row in csv.DictReader(handle)
            for mid in row["labels"].split(";")
        }
    mapped = Label.objects.filter(mid__in=[mid for mid, _ in wanted]).values_list(
        "mid", "word_label__name"
    )
    return len(wanted & set(mapped)), len(wanted)


# Clip counts per label (the ontology page's cache) --------------------------------------


def label_counts_refresh(*, label_ids: Iterable[int] | None = None) -> int:
    """Recounts the cached clips per label and AudioSet list (LabelSourceCount) from the
    clip-label links: every label, or only `label_ids`. Two set-based statements (delete,
    then INSERT … SELECT … GROUP BY) run in the caller's transaction, so an import that fails
    rolls its counts back with its clips. Idempotent; returns the count rows written."""
    counts = LabelSourceCount._meta.db_table
    links = Clip.labels.through._meta.db_table
    clips = Clip._meta.db_table
    where, params = "", []
    if label_ids is not None:
        # at most the ontology's few hundred labels, well within SQLite's variable limit
        ids = sorted(set(label_ids))
        if not ids:
            return 0
        where = f"WHERE label_id IN ({', '.join(['%s'] * len(ids))})"
        params = ids
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Two imports committing side by side would each delete only the rows they can
            # see and then collide on the unique constraint; waiting here for the other to
            # commit also lets this one count the other's links. Readers are not blocked.
            cursor.execute(f"LOCK TABLE {counts} IN EXCLUSIVE MODE")
        cursor.execute(f"DELETE FROM {counts} {where}", params)
        cursor.execute(
            f"INSERT INTO {counts} (label_id, segment_list, clips) "
            f"SELECT label_id, {clips}.segment_list, COUNT(*) FROM {links} "
            f"JOIN {clips} ON {clips}.id = {links}.clip_id {where} "
            f"GROUP BY label_id, {clips}.segment_list",
            params,
        )
        return cursor.rowcount


def label_counts_adjust(*, changes: Iterable[tuple[int, str, int]]) -> None:
    """Adds each (label id, segment list, delta) to the cached counts, never going below
    zero. The cheap path for edits of a few links (one clip's labels, a deleted clip), where
    recounting a label that a million clips carry would cost far more than the edit."""
    rows = [(label_id, segment_list, delta) for label_id, segment_list, delta in changes if delta]
    if not rows:
        return
    table = LabelSourceCount._meta.db_table
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (label_id, segment_list, clips) VALUES (%s, %s, %s) "
            "ON CONFLICT (label_id, segment_list) DO UPDATE SET clips = "
            f"CASE WHEN {table}.clips + %s < 0 THEN 0 ELSE {table}.clips + %s END",
            [(label_id, lst, max(delta, 0), delta, delta) for label_id, lst, delta in rows],
        )


def word_labels_import(*, path: Path) -> dict[str, int]:
    """Loads a CSV `word,super_category,labels` (labels: AudioSet names or ids joined by `;`)
    that maps AudioSet labels to hint words, AudioCaps-style. A word under several
    super-categories lists them joined by `;`, its own first (AudioCaps' "Hiss":
    `other_things;source_ambiguous;animal`). Other columns (notes) are ignored. All or
    nothing: a bad row is reported with its line and nothing changes."""
    path = Path(path)
    by_key = {mid: pk for pk, mid in Label.objects.values_list("pk", "mid")}
    by_key.update({name.lower(): pk for pk, name in Label.objects.values_list("pk", "name")})
    rows: list[tuple[str, list[str], list[int]]] = []
    try:
        with path.open("rb") as head:
            if refusal := utf16_refusal(head.read(SNIFF_BYTES)):
                raise ValidationError(f"{path.name}: the file {refusal}")
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = {"word", "super_category", "labels"} - set(reader.fieldnames or [])
            if missing:
                raise ValidationError(
                    f"{path.name}: missing column(s) {', '.join(sorted(missing))}"
                )
            for row in reader:
                where = f"{path.name}, line {reader.line_num}"
                word = (row["word"] or "").strip().lower()
                cell = (row["super_category"] or "").strip().lower()
                categories = list(dict.fromkeys(c.strip() for c in cell.split(";") if c.strip()))
                if not word:
                    raise ValidationError(f"{where}: empty word")
                wrong = [c for c in categories if c not in SuperCategory.values]
                if wrong or not categories:
                    raise ValidationError(
                        f"{where}: super_category {(wrong or [cell])[0]!r} is not one of "
                        f"{', '.join(SuperCategory.values)}"
                    )
                keys = [k.strip() for k in (row["labels"] or "").split(";") if k.strip()]
                unknown = [k for k in keys if k not in by_key and k.lower() not in by_key]
                if not keys or unknown:
                    raise ValidationError(f"{where}: unknown AudioSet label(s) {unknown or keys}")
                # every key is known as written or in lower case (checked just above)
                label_pks = [by_key[k] if k in by_key else by_key[k.lower()] for k in keys]
                rows.append((word, categories, label_pks))
    except FileNotFoundError:
        raise ValidationError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise ValidationError(f"{path.name}: not UTF-8 text") from None
    with transaction.atomic():
        for word, categories, label_pks in rows:
            word_label, _ = WordLabel.objects.update_or_create(
                name=word, defaults={"super_category": categories[0]}
            )
            word_label.extra_categories.all().delete()
            WordLabelExtraCategory.objects.bulk_create(
                [
                    WordLabelExtraCategory(word_label=word_label, super_category=c)
                    for c in categories[1:]
                ]
            )
            Label.objects.filter(pk__in=label_pks).update(word_label=word_label)
    return {"words": len(rows), "labels": sum(len(pks) for _, _, pks in rows)}
