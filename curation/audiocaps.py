"""AudioCaps' curated ontology (Kim et al., NAACL 2019) as data: the word labels of the
paper's Figure 7 resolved to AudioSet mids, and the bundled flag set. No Django here.

The bundled files live in curation/fixtures/ (see AUDIOCAPS.md there):

- audiocaps_word_labels.csv: `word,super_category,labels,names,note`, importable with
  `import_word_labels` (labels are mids; a word under several super-categories lists them
  all, first as in the figure);
- audiocaps_word_labels_unresolved.csv: `figure_name,super_category,reason`, each name of
  the figure that names no single ontology class;
- audiocaps_label_flags.csv: `mid,name,flag,reason`, reviewed by hand, not generated.

The first two are made from AudioSet's ontology.json by this module, so anyone can check
them: `python -m curation.audiocaps ../shared/data/audioset/ontology.json` rewrites them
(tests/curation/test_audiocaps.py checks the shipped files equal what it makes).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.text import SafeCsvWriter

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WORD_LABELS = FIXTURES / "audiocaps_word_labels.csv"
UNRESOLVED = FIXTURES / "audiocaps_word_labels_unresolved.csv"
FLAG_SET = FIXTURES / "audiocaps_label_flags.csv"

# The recipe field word_label_set names one of these, or "site" (the imported word labels).
WORD_LABEL_SETS: dict[str, Path] = {"audiocaps": WORD_LABELS}

# Figure 7 as printed: super-category (curation.models.SuperCategory values), then its word
# labels. " / " joins two AudioSet classes the figure shows as one word label. Some labels
# sit under two or three groups (Hiss, Rub, Whoosh, Trickle); each keeps all of them.
FIGURE_7: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "alarm",
        (
            "Siren",
            "Vehicle horn, car horn, honking",
            "Train horn",
            "Beep, bleep",
            "Telephone",
            "Bell",
        ),
    ),
    (
        "mechanical",
        (
            "Truck",
            "Motorboat, speedboat",
            "Motorcycle",
            "Idling",
            "Race car, auto racing",
            "Aircraft",
            "Bus",
            "Helicopter",
            "Drill",
            "Sewing machine",
            "Engine starting",
        ),
    ),
    (
        "domestic",
        (
            "Tick-tock",
            "Water tap, faucet",
            "Door",
            "Toilet flush",
            "Typing",
            "Dishes, pots, pans",
            "Frying (food)",
        ),
    ),
    (
        "other_things",
        (
            "Gunshot, gunfire",
            "Car passing by",
            "Hiss",
            "Spray",
            "Rub",
            "Burst, pop",
            "Tire squeal",
            "Whoosh, swoosh, swish",
            "Trickle, dribble",
        ),
    ),
    (
        "source_ambiguous",
        ("Hiss", "Rub", "Whoosh, swoosh, swish", "Crumpling, crinkling", "Sizzle"),
    ),
    (
        "animal",
        (
            "Pigeon, dove",
            "Bird vocalization, bird call, bird song / Chirp, tweet",
            "Bow-wow",
            "Clip-clop",
            "Insect",
            "Horse",
            "Hiss",
            "Duck",
            "Sheep",
            "Goat",
            "Bee, wasp, etc.",
            "Whimper (dog)",
            "Meow",
            "Oink",
            "Frog",
        ),
    ),
    (
        "natural",
        (
            "Wind",
            "Rain",
            "Wood",
            "Stream",
            "Gurgling",
            "Thunder",
            "Trickle, dribble",
            "Waves, surf",
            "Rustling leaves",
        ),
    ),
    (
        "human",
        (
            "Male speech, man speaking",
            "Child speech, kid speaking",
            "Female speech, woman speaking",
            "Laughter",
            "Snoring",
            "Baby cry, infant cry",
            "Whistling",
            "Applause",
            "Crying, sobbing",
            "Burping, eructation",
            "Sneeze",
        ),
    ),
)

WORD_LABEL_COLUMNS = ("word", "super_category", "labels", "names", "note")
UNRESOLVED_COLUMNS = ("figure_name", "super_category", "reason")
FLAG_COLUMNS = ("mid", "name", "flag", "reason")


@dataclass
class WordLabelRow:
    word: str
    super_categories: list[str]
    mids: list[str]
    names: list[str]
    notes: list[str]


@dataclass
class UnresolvedName:
    figure_name: str
    super_categories: list[str]
    reason: str


@dataclass
class FlagRow:
    line: int
    mid: str
    name: str
    flag: str
    reason: str


def _key(name: str) -> str:
    """A name without case, punctuation or "and": the figure prints "Dishes, pots, pans"
    for the ontology's "Dishes, pots, and pans"."""
    words = re.findall(r"[a-z0-9]+", name.lower())
    return " ".join(w for w in words if w != "and")


class _Ontology:
    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self.by_mid = {e["id"]: e for e in entries}
        self.by_name: dict[str, list[str]] = {}
        self.by_key: dict[str, list[str]] = {}
        self.parents: dict[str, list[str]] = {}
        for entry in entries:
            self.by_name.setdefault(entry["name"].lower(), []).append(entry["id"])
            self.by_key.setdefault(_key(entry["name"]), []).append(entry["id"])
            for child in entry.get("child_ids") or []:
                self.parents.setdefault(child, []).append(entry["id"])

    def roots(self, mid: str) -> list[str]:
        """The names of the top-level classes `mid` sits under, in ontology order."""
        found: set[str] = set()
        stack, seen = [mid], set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            parents = self.parents.get(node, [])
            if not parents:
                found.add(node)
            stack.extend(parents)
        order = list(self.by_mid)
        return [self.by_mid[r]["name"] for r in sorted(found, key=order.index)]

    def resolve(self, name: str) -> tuple[str | None, str]:
        """(mid, note) for a name of the figure, or (None, why not)."""
        exact = self.by_name.get(name.lower(), [])
        if len(exact) == 1:
            return exact[0], ""
        loose = self.by_key.get(_key(name), [])
        if not exact and len(loose) == 1:
            return loose[0], f"the figure writes {name!r}; the ontology names it " + repr(
                self.by_mid[loose[0]]["name"]
            )
        matches = exact or loose
        if matches:
            listed = ", ".join(f"{m} {self.by_mid[m]['name']!r}" for m in matches)
            return None, f"ambiguous: the ontology has several classes of this name ({listed})"
        return None, "no ontology class has this name (nor the same words without punctuation)"


def resolve_figure_7(
    entries: list[dict[str, Any]], *, trainable: set[str] | None = None
) -> tuple[list[WordLabelRow], list[UnresolvedName]]:
    """Resolves every name of FIGURE_7 against ontology.json's entries. `trainable`, the mids
    of class_labels_indices.csv when given, adds a note to labels that no clip can carry."""
    ontology = _Ontology(entries)
    rows: list[WordLabelRow] = []
    unresolved: list[UnresolvedName] = []
    # each word's groups, one list shared by its row and its unresolved names, so a group
    # met later in the figure reaches both
    groups_of: dict[str, list[str]] = {}
    for category, words in FIGURE_7:
        for figure_word in words:
            word = figure_word.lower()
            if word in groups_of:  # the same word label under another group of the figure
                groups_of[word].append(category)
                continue
            groups = groups_of[word] = [category]
            row = WordLabelRow(word, groups, [], [], [])
            for name in figure_word.split(" / "):
                mid, note = ontology.resolve(name)
                if mid is None:
                    unresolved.append(UnresolvedName(name, groups, note))
                    continue
                entry = ontology.by_mid[mid]
                row.mids.append(mid)
                row.names.append(entry["name"])
                row.notes.extend([note] if note else [])
                restrictions = entry.get("restrictions") or []
                if restrictions:
                    row.notes.append(f"{entry['name']}: {', '.join(restrictions)} in the ontology")
                if trainable is not None and mid not in trainable:
                    row.notes.append(f"{entry['name']}: not one of AudioSet's 527 classes")
                roots = ontology.roots(mid)
                if len(roots) > 1:
                    row.notes.append(f"{entry['name']} sits under {', '.join(roots)}")
            if row.mids:
                rows.append(row)
    return rows, unresolved


def word_labels_csv(rows: list[WordLabelRow]) -> str:
    out = io.StringIO()
    writer = SafeCsvWriter(out, lineterminator="\n")
    writer.writerow(WORD_LABEL_COLUMNS)
    for row in rows:
        writer.writerow(
            [
                row.word,
                ";".join(row.super_categories),
                ";".join(row.mids),
                ";".join(row.names),
                "; ".join(row.notes),
            ]
        )
    return out.getvalue()


def unresolved_csv(names: list[UnresolvedName]) -> str:
    out = io.StringIO()
    writer = SafeCsvWriter(out, lineterminator="\n")
    writer.writerow(UNRESOLVED_COLUMNS)
    writer.writerows([n.figure_name, ";".join(n.super_categories), n.reason] for n in names)
    return out.getvalue()


def read_word_label_set(name: str) -> dict[str, tuple[str, list[str]]]:
    """A bundled word-label set: each AudioSet mid it maps, with its word and the word's
    super-categories (its own first)."""
    if name not in WORD_LABEL_SETS:
        raise KeyError(f"no bundled word-label set {name!r}; known: {', '.join(WORD_LABEL_SETS)}")
    mapped: dict[str, tuple[str, list[str]]] = {}
    with WORD_LABEL_SETS[name].open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            categories = [c.strip() for c in row["super_category"].split(";") if c.strip()]
            for mid in row["labels"].split(";"):
                mapped[mid.strip()] = (row["word"].strip().lower(), categories)
    return mapped


def read_flags(path: Path, *, known: tuple[str, ...]) -> list[FlagRow]:
    """The rows of a flag-set CSV (`mid,name,flag,reason`), each flag one of `known`.
    ValueError names the file and line of a malformed row; whether each mid exists is for
    the caller to check."""
    rows: list[FlagRow] = []
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        missing = set(FLAG_COLUMNS[:3]) - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path.name}: missing column(s) {', '.join(sorted(missing))}")
        for raw in reader:
            where = f"{path.name}, line {reader.line_num}"
            row = FlagRow(
                reader.line_num,
                (raw["mid"] or "").strip(),
                (raw["name"] or "").strip(),
                (raw["flag"] or "").strip(),
                (raw.get("reason") or "").strip(),
            )
            if not row.mid:
                raise ValueError(f"{where}: empty mid")
            if row.flag not in known:
                raise ValueError(f"{where}: flag {row.flag!r} is not one of {', '.join(known)}")
            rows.append(row)
    return rows


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(
            "usage: python -m curation.audiocaps ONTOLOGY_JSON [OUT_DIR]\n"
            "  writes audiocaps_word_labels.csv and audiocaps_word_labels_unresolved.csv "
            f"(default OUT_DIR: {FIXTURES}); class_labels_indices.csv beside the ontology, "
            "when there, marks labels outside AudioSet's 527 classes",
            file=sys.stderr,
        )
        return 2
    ontology_path = Path(argv[0])
    out_dir = Path(argv[1]) if len(argv) == 2 else FIXTURES
    entries = json.loads(ontology_path.read_text(encoding="utf-8"))
    indices = ontology_path.with_name("class_labels_indices.csv")
    trainable = None
    if indices.is_file():
        with indices.open(newline="", encoding="utf-8") as handle:
            trainable = {row["mid"] for row in csv.DictReader(handle)}
    rows, unresolved = resolve_figure_7(entries, trainable=trainable)
    (out_dir / WORD_LABELS.name).write_text(word_labels_csv(rows), encoding="utf-8")
    (out_dir / UNRESOLVED.name).write_text(unresolved_csv(unresolved), encoding="utf-8")
    print(
        f"{len(rows)} word labels ({sum(len(r.mids) for r in rows)} AudioSet labels), "
        f"{len(unresolved)} names unresolved, written to {out_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
