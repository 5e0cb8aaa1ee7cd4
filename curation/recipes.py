"""Subset recipes: the spec, its TOML/JSON forms, and the selection algorithm.

No Django models here: `select_subset` works on NumPy arrays, so a build over millions of
clips stays fast and the rules are testable on hand-made data.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import tomli_w

from curation.audiocaps import WORD_LABEL_SETS

FLAGS = ("needs_visuals", "needs_expertise", "excluded")
SEGMENT_LISTS = ("balanced", "eval", "unbalanced")
# what a recipe's video_features_height may be (curation.fetch makes the video)
VIDEO_FEATURES_HEIGHTS = (240, 360, 480)
# Counts (clips per label, split sizes) stay far above AudioSet's two million clips and
# far below NumPy's int64, so the selection's arithmetic cannot overflow.
MAX_COUNT = 1_000_000_000
MAX_SEED = 2**63 - 1  # a seed fits a 64-bit integer (NumPy refuses negative ones)
# a batch asks for at most this many captions per clip (annotation's batches use it too)
MAX_CAPTIONS_PER_CLIP = 20
# word_label_set: the site's imported word labels, or a bundled set (curation/fixtures)
WORD_LABEL_SET_CHOICES = ("site", *WORD_LABEL_SETS)
SPLITS = ("train", "val", "test")


class RecipeError(ValueError):
    """A recipe that cannot be used; the message names the field."""


@dataclass
class RecipeSpec:
    # AudioSet lists to draw clips from
    segment_lists: list[str] = field(default_factory=lambda: list(SEGMENT_LISTS))
    # drop labels with fewer candidate clips than this (AudioCaps: 1000)
    min_clips_per_label: int = 0
    # ontology subtrees (names or ids) whose labels are never used (AudioCaps: Music)
    excluded_subtrees: list[str] = field(default_factory=list)
    # also drop every clip that carries a label from an excluded subtree
    drop_clips_with_excluded_labels: bool = True
    # keep a label of an excluded subtree that also sits under a parent outside it (Bell is
    # under Music > Musical instrument and Sounds of things; AudioCaps kept it)
    keep_labels_also_outside_excluded_subtrees: bool = False
    # curation flags that exclude a label: needs_visuals, needs_expertise, excluded
    excluded_flags: list[str] = field(default_factory=lambda: ["excluded"])
    # honour the ontology's restrictions
    exclude_abstract: bool = True
    exclude_blacklisted: bool = True
    # which labels are word labels: "site" (those the imported word labels map) or a bundled
    # set ("audiocaps": the paper's Figure 7); clips with more of them are preferred
    word_label_set: str = "site"
    # keep only labels of that word-label set
    only_word_labels: bool = False
    # fill each label up to this many clips, preferring clips with more word labels
    max_clips_per_label: int | None = None
    # the cap is hard: a clip is taken only if none of its kept labels is full yet. Soft
    # (false): a clip taken for one label also counts for its others, which may pass the cap
    hard_cap: bool = False
    # then trim any label holding more than this share of the selected clips (0..1)
    max_label_share: float | None = None
    # validation and test sizes: a count (int) or a fraction (float < 1); train gets the rest
    val_size: float | int = 0.1
    test_size: float | int = 0.1
    # captions a caption batch asks for per clip of each split, unless it says otherwise
    # (AudioCaps: 1 per training clip, 5 per validation and test clip)
    captions_per_train_clip: int = 1
    captions_per_val_clip: int = 5
    captions_per_test_clip: int = 5
    # the same seed on the same data selects and splits the same clips
    seed: int = 0
    # fetching also stores a silent video this many pixels tall (240, 360 or 480) for video
    # features, beside the 144p hint; absent: the hint only. Changes no selection.
    video_features_height: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecipeSpec:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RecipeError(
                f"unknown recipe field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        spec = cls(**data)
        spec.validate()
        return spec

    def validate(self) -> None:
        def need(ok: bool, name: str, why: str) -> None:
            if not ok:
                raise RecipeError(f"{name}: {why} (got {_shown(getattr(self, name))})")

        def count(value: Any, least: int) -> bool:
            return _is_int(value) and least <= value <= MAX_COUNT

        need(
            isinstance(self.segment_lists, list)
            and bool(self.segment_lists)
            and all(s in SEGMENT_LISTS for s in self.segment_lists),
            "segment_lists",
            f"a non-empty list of {', '.join(SEGMENT_LISTS)}",
        )
        need(
            count(self.min_clips_per_label, 0),
            "min_clips_per_label",
            f"a whole number from 0 to {MAX_COUNT:,}",
        )
        need(
            isinstance(self.excluded_subtrees, list)
            and all(isinstance(s, str) for s in self.excluded_subtrees),
            "excluded_subtrees",
            "a list of label names or ids",
        )
        need(
            isinstance(self.excluded_flags, list) and all(f in FLAGS for f in self.excluded_flags),
            "excluded_flags",
            f"a list of {', '.join(FLAGS)}",
        )
        for name in (
            "drop_clips_with_excluded_labels",
            "keep_labels_also_outside_excluded_subtrees",
            "exclude_abstract",
            "exclude_blacklisted",
            "only_word_labels",
            "hard_cap",
        ):
            need(isinstance(getattr(self, name), bool), name, "true or false")
        need(
            isinstance(self.word_label_set, str) and self.word_label_set in WORD_LABEL_SET_CHOICES,
            "word_label_set",
            f"one of {', '.join(WORD_LABEL_SET_CHOICES)}",
        )
        need(
            self.max_clips_per_label is None or count(self.max_clips_per_label, 1),
            "max_clips_per_label",
            f"a whole number from 1 to {MAX_COUNT:,}, or absent",
        )
        need(
            self.max_label_share is None
            or (isinstance(self.max_label_share, int | float) and 0 < self.max_label_share < 1),
            "max_label_share",
            "a fraction between 0 and 1, or absent",
        )
        for name in ("val_size", "test_size"):
            value = getattr(self, name)
            need(
                count(value, 0) or (isinstance(value, float) and 0 <= value < 1),
                name,
                f"a count from 0 to {MAX_COUNT:,} or a fraction below 1",
            )
        for split in SPLITS:
            name = f"captions_per_{split}_clip"
            need(
                count(getattr(self, name), 1) and getattr(self, name) <= MAX_CAPTIONS_PER_CLIP,
                name,
                f"a whole number from 1 to {MAX_CAPTIONS_PER_CLIP}",
            )
        fractions = [v for v in (self.val_size, self.test_size) if isinstance(v, float)]
        need(sum(fractions) < 1, "test_size", "val and test fractions must leave some train")
        need(
            _is_int(self.seed) and 0 <= self.seed <= MAX_SEED,
            "seed",
            f"a whole number from 0 to {MAX_SEED:,}",
        )
        need(
            self.video_features_height is None
            or (
                _is_int(self.video_features_height)
                and self.video_features_height in VIDEO_FEATURES_HEIGHTS
            ),
            "video_features_height",
            f"one of {', '.join(map(str, VIDEO_FEATURES_HEIGHTS))}, or absent",
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def captions_per_clip(self, split: str) -> int:
        """How many captions a batch of this split asks for per clip by default."""
        value: int = getattr(self, f"captions_per_{split}_clip")
        return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    """A field's value for an error message: its repr, shortened (a pasted 60 KB value
    or a 4,000-digit number would drown the message)."""
    try:
        text = repr(value)
    except ValueError:  # an int too long for Python to print
        return "a number too long to show"
    return text if len(text) <= 60 else f"{text[:57]}…"


PRESETS: dict[str, RecipeSpec] = {
    # AudioCaps (Kim et al., 2019): AudioSet's unbalanced list (its 527 classes), the Music
    # subtree out (Bell, also under Sounds of things, stays: the paper keeps it), labels with
    # < 1,000 clips dropped, flagged labels dropped (apply the AudioCaps flags to the project
    # first), only the paper's word labels (Figure 7), at most 2,000 clips per label as a
    # hard cap, preferring clips with more word labels; 1 caption per train clip, 5 per
    # val/test clip.
    "audiocaps": RecipeSpec(
        segment_lists=["unbalanced"],
        min_clips_per_label=1000,
        excluded_subtrees=["Music"],
        keep_labels_also_outside_excluded_subtrees=True,
        excluded_flags=["excluded", "needs_visuals", "needs_expertise"],
        word_label_set="audiocaps",
        only_word_labels=True,
        max_clips_per_label=2000,
        hard_cap=True,
        val_size=500,
        test_size=1000,
    ),
}


def recipe_from_text(text: str, *, fmt: str) -> tuple[RecipeSpec, str]:
    """Parses a recipe written as TOML or JSON (fmt "toml" or "json"): its spec, and the
    `name` it gives itself ("" when it has none)."""
    try:
        if fmt == "toml":
            data = tomllib.loads(text)
        elif fmt == "json":
            data = json.loads(text)
        else:
            raise RecipeError(f"unknown recipe format {fmt!r}; use toml or json")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise RecipeError(f"not valid {fmt.upper()}: {exc}") from None
    except RecursionError:  # lists or tables inside each other thousands deep
        raise RecipeError(f"not valid {fmt.upper()}: nested too deeply") from None
    except ValueError:  # an integer longer than Python reads (4,300 digits)
        raise RecipeError(f"not valid {fmt.upper()}: a number is too long") from None
    if not isinstance(data, dict):
        raise RecipeError("a recipe is a table of fields")
    name = data.pop("name", "")
    return RecipeSpec.from_dict(data), name if isinstance(name, str) else ""


def spec_from_text(text: str, *, fmt: str) -> RecipeSpec:
    return recipe_from_text(text, fmt=fmt)[0]


def spec_to_text(spec: RecipeSpec, *, fmt: str, name: str = "") -> str:
    data = {k: v for k, v in spec.to_dict().items() if v is not None}
    if name:
        data = {"name": name, **data}
    if fmt == "toml":
        return tomli_w.dumps(data)
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    raise RecipeError(f"unknown recipe format {fmt!r}; use toml or json")


# Selection -------------------------------------------------------------------------------


@dataclass
class Candidates:
    """Everything `select_subset` needs, as arrays.

    clip_ids (C,) sorted ascending; link_clip (L,) and link_label (L,) index clips and labels;
    label_usable (K,) bool after flags/restrictions/excluded subtrees; label_excluded (K,)
    bool for labels in excluded subtrees; label_has_word (K,) bool.
    """

    clip_ids: np.ndarray
    link_clip: np.ndarray
    link_label: np.ndarray
    label_usable: np.ndarray
    label_excluded: np.ndarray
    label_has_word: np.ndarray


@dataclass
class Selection:
    clip_ids: np.ndarray  # (S,) selected clip ids, in split order
    splits: np.ndarray  # (S,) "train" | "val" | "test"
    counts_before: np.ndarray  # (K,) candidate clips per label, usable labels only
    counts_after: np.ndarray  # (K,) selected clips per label
    kept_labels: np.ndarray  # (K,) bool: usable and frequent enough


def select_subset(spec: RecipeSpec, data: Candidates) -> Selection:
    n_clips, n_labels = len(data.clip_ids), len(data.label_usable)
    rng = np.random.default_rng(spec.seed)
    tiebreak = rng.random(n_clips)

    alive = np.ones(n_clips, dtype=bool)
    if spec.drop_clips_with_excluded_labels:
        alive[data.link_clip[data.label_excluded[data.link_label]]] = False

    usable_link = data.label_usable[data.link_label] & alive[data.link_clip]
    counts_before = np.bincount(data.link_label[usable_link], minlength=n_labels)
    kept = data.label_usable & (counts_before >= max(spec.min_clips_per_label, 1))

    link_mask = kept[data.link_label] & alive[data.link_clip]
    link_clip, link_label = data.link_clip[link_mask], data.link_label[link_mask]
    has_kept = np.zeros(n_clips, dtype=bool)
    has_kept[link_clip] = True

    # Preference: more word labels first, then a seeded random order.
    words = np.bincount(link_clip[data.label_has_word[link_label]], minlength=n_clips)
    rank = np.lexsort((tiebreak, -words))  # best first
    position = np.empty(n_clips, dtype=np.int64)
    position[rank] = np.arange(n_clips)

    by_clip = group_by(link_clip, link_label, n_clips)
    selected = np.zeros(n_clips, dtype=bool)
    counts = np.zeros(n_labels, dtype=np.int64)
    if spec.max_clips_per_label is None:
        selected = has_kept.copy()
        np.add.at(counts, link_label, 1)
    else:
        by_label = group_by(link_label, link_clip, n_labels)
        cap = spec.max_clips_per_label
        # Rare labels first, so frequent labels' co-occurring clips don't starve them.
        for label in np.argsort(
            counts_before + np.where(kept, 0, np.iinfo(np.int64).max // 2), kind="stable"
        ):
            if not kept[label] or counts[label] >= cap:
                continue
            pool = _members(by_label, label)
            pool = pool[~selected[pool]]
            pool = pool[np.argsort(position[pool], kind="stable")]
            if spec.hard_cap:
                _fill_hard(pool, cap, cap - int(counts[label]), selected, counts, by_clip)
                continue
            take = pool[: cap - counts[label]]
            selected[take] = True
            counts += np.bincount(gather_groups(by_clip, take), minlength=n_labels)

    if spec.max_label_share is not None:
        _trim_dominant(
            spec.max_label_share, selected, counts, position, by_clip, link_clip, link_label
        )

    chosen = np.flatnonzero(selected)
    order = chosen[rng.permutation(len(chosen))]
    splits = _assign_splits(len(order), spec.val_size, spec.test_size)
    return Selection(data.clip_ids[order], splits, counts_before * kept, counts, kept)


def _fill_hard(
    pool: np.ndarray,
    cap: int,
    wanted: int,
    selected: np.ndarray,
    counts: np.ndarray,
    by_clip: tuple[np.ndarray, np.ndarray],
) -> None:
    """Takes up to `wanted` clips of `pool` (best first), each only if none of its kept
    labels holds `cap` clips yet, so no label ever passes the cap."""
    if len(pool) == 0:
        return
    starts, labels = by_clip
    # Clips carrying a label that is already full can never be taken: drop them at once.
    # Every pool clip carries the label being filled, so none has an empty segment.
    lengths = starts[pool + 1] - starts[pool]
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    blocked = np.logical_or.reduceat((counts >= cap)[gather_groups(by_clip, pool)], offsets)
    for clip in pool[~blocked]:
        own = labels[starts[clip] : starts[clip + 1]]
        if (counts[own] >= cap).any():  # filled by a clip taken earlier in this loop
            continue
        selected[clip] = True
        counts[own] += 1
        wanted -= 1
        if wanted == 0:
            return


def group_by(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR-style grouping: values of key k are values[starts[k]:starts[k+1]]."""
    order = np.argsort(keys, kind="stable")
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=starts[1:])
    return starts, values[order]


def _members(index: tuple[np.ndarray, np.ndarray], key: int) -> np.ndarray:
    starts, values = index
    return values[starts[key] : starts[key + 1]]


def gather_groups(index: tuple[np.ndarray, np.ndarray], keys: np.ndarray) -> np.ndarray:
    """The values of all `keys`, concatenated (vectorised _members)."""
    starts, values = index
    low, lengths = starts[keys], starts[keys + 1] - starts[keys]
    if lengths.sum() == 0:
        return values[:0]
    shift = np.repeat(low - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return values[shift + np.arange(lengths.sum())]


def _trim_dominant(
    share: float,
    selected: np.ndarray,
    counts: np.ndarray,
    position: np.ndarray,
    by_clip: tuple[np.ndarray, np.ndarray],
    link_clip: np.ndarray,
    link_label: np.ndarray,
) -> None:
    """Drops the least preferred clips of any label above `share` of the selection."""
    for _ in range(len(counts)):
        total = int(selected.sum())
        if total == 0:
            return
        label = int(np.argmax(counts))
        if counts[label] <= share * total:
            return
        excess = int(np.ceil((counts[label] - share * total) / (1 - share)))
        pool = link_clip[(link_label == label) & selected[link_clip]]
        drop = pool[np.argsort(position[pool], kind="stable")[::-1][:excess]]
        selected[drop] = False
        counts -= np.bincount(gather_groups(by_clip, drop), minlength=len(counts))


def _assign_splits(n: int, val_size: float | int, test_size: float | int) -> np.ndarray:
    def size(value: float | int) -> int:
        return round(value * n) if isinstance(value, float) else int(value)

    n_val, n_test = size(val_size), size(test_size)
    if n_val + n_test > n:
        raise RecipeError(
            f"val_size + test_size ask for {n_val + n_test} clips but only {n} were selected"
        )
    splits = np.full(n, "train", dtype="<U5")
    splits[:n_val] = "val"
    splits[n_val : n_val + n_test] = "test"
    return splits


def skew(counts: np.ndarray) -> float:
    """AudioCaps' imbalance figure: mean of the 3 most common minus the 3 least common."""
    values = np.sort(counts[counts > 0])
    if len(values) == 0:
        return 0.0
    k = min(3, len(values))
    return float(values[-k:].mean() - values[:k].mean())
