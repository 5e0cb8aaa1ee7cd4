"""Corpus statistics as in the AudioCaps paper: Table 1 (clips, captions, words per caption,
labels per clip, per split) and Table 5 (tokens, vocabulary, and the nouns, verbs,
adjectives and adverbs in it), plus the two charts. No Django here.

Words are counted the same way for every corpus, so numbers compare: the caption is
lower-cased and a word is a run of letters or digits, optionally joined by apostrophes
("don't", "3rd" and "1990s" are one word each; "1,000" is two). Parts of speech come from a
spaCy pipeline: a vocabulary word counts as the part of speech it is tagged with most often.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")  # ' or a typographic apostrophe
WORD_RULE = "lower-cased runs of letters or digits, apostrophes inside a word kept"
# spaCy universal POS -> the Table 5 column it counts in
POS_COLUMNS = {"NOUN": "nouns", "PROPN": "nouns", "VERB": "verbs", "ADJ": "adjectives"}
POS_COLUMNS |= {"ADV": "adverbs"}
TOP_LABELS = 30


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _median(histogram: Counter[int]) -> float:
    """The median of the values a {value: count} histogram holds."""
    total = sum(histogram.values())
    if not total:
        return 0.0
    ordered = sorted(histogram)

    def nth(k: int) -> int:  # the k-th smallest value, from 0
        seen = 0
        for value in ordered:
            seen += histogram[value]
            if seen > k:
                return value
        raise AssertionError("k is below the total")

    return (nth((total - 1) // 2) + nth(total // 2)) / 2


def _mean(histogram: Counter[int]) -> float:
    total = sum(histogram.values())
    return round(sum(v * n for v, n in histogram.items()) / total, 4) if total else 0.0


@dataclass
class _SplitTally:
    captions: int = 0
    lengths: Counter[int] = field(default_factory=Counter)  # words per caption -> captions
    vocabulary: Counter[str] = field(default_factory=Counter)
    clips: set[int] = field(default_factory=set)


class Tally:
    """Accumulates captions one at a time (memory: a length histogram, the vocabulary and
    one id per clip), then summarises with each clip's labels."""

    def __init__(self) -> None:
        self.splits: dict[str, _SplitTally] = {}

    def add(self, *, split: str, clip_id: int, text: str) -> None:
        tally = self.splits.get(split)
        if tally is None:
            tally = self.splits[split] = _SplitTally()
        found = words(text)
        tally.captions += 1
        tally.lengths[len(found)] += 1
        tally.vocabulary.update(found)
        tally.clips.add(clip_id)

    @property
    def clip_ids(self) -> set[int]:
        return set().union(*(t.clips for t in self.splits.values()))

    def summary(self, *, clip_labels: dict[int, list[str]], label_names: dict[str, str]) -> dict:
        """The statistics; `clip_labels` maps clip id -> AudioSet mids (clips without labels
        may be missing; they are left out of labels per clip, not counted as zero)."""
        rows = {name: self._row([t], clip_labels) for name, t in sorted(self.splits.items())}
        every = list(self.splits.values())
        lengths: Counter[int] = sum((t.lengths for t in every), Counter())
        per_label: Counter[str] = Counter(m for c in self.clip_ids for m in clip_labels.get(c, []))
        return {
            "word_rule": WORD_RULE,
            "splits": rows,
            "all": self._row(every, clip_labels),
            "length_histogram": {str(n): lengths[n] for n in sorted(lengths)},
            "labels": [
                {"mid": mid, "name": label_names.get(mid, mid), "clips": n}
                for mid, n in sorted(per_label.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
        }

    @staticmethod
    def _row(tallies: list[_SplitTally], clip_labels: dict[int, list[str]]) -> dict[str, Any]:
        lengths: Counter[int] = sum((t.lengths for t in tallies), Counter())
        clips = set().union(*(t.clips for t in tallies)) if tallies else set()
        labelled = Counter(len(clip_labels[c]) for c in clips if clip_labels.get(c))
        vocabulary: Counter[str] = Counter()
        for t in tallies:
            vocabulary.update(t.vocabulary)
        captions = sum(t.captions for t in tallies)
        return {
            "clips": len(clips),
            "captions": captions,
            "captions_per_clip": round(captions / len(clips), 4) if clips else 0.0,
            "words_per_caption_mean": _mean(lengths),
            "words_per_caption_median": _median(lengths),
            "clips_with_labels": sum(labelled.values()),
            "labels_per_clip_mean": _mean(labelled),
            "labels_per_clip_median": _median(labelled),
            "tokens": sum(v * n for v, n in lengths.items()),
            "vocabulary": len(vocabulary),
        }


def pos_counts(texts: Iterable[str], nlp: Any, *, batch_size: int = 512) -> dict[str, int]:
    """Table 5: how many vocabulary words are nouns, verbs, adjectives and adverbs, each
    word counted once under the part of speech it is tagged with most often (ties: the
    first of noun, verb, adjective, adverb)."""
    tags: dict[str, Counter[str]] = {}
    for doc in nlp.pipe(texts, batch_size=batch_size):
        for token in doc:
            if not WORD.fullmatch(token.lower_):
                continue  # punctuation, symbols, spaces
            tags.setdefault(token.lower_, Counter())[POS_COLUMNS.get(token.pos_, "other")] += 1
    order = ["nouns", "verbs", "adjectives", "adverbs", "other"]
    result = dict.fromkeys(order, 0)
    for counts in tags.values():
        best = max(order, key=lambda column: (counts[column], -order.index(column)))
        result[best] += 1
    return {"vocabulary": len(tags), **result}


def length_chart(data: dict[str, Any], *, title: str) -> bytes:
    """Caption-length histogram (words per caption) as PNG."""
    histogram = {int(k): v for k, v in data.get("length_histogram", {}).items()}
    figure, axes = _figure((7, 3.2))
    if histogram:
        xs = list(range(min(histogram), max(histogram) + 1))
        axes.bar(xs, [histogram.get(x, 0) for x in xs], color="#1f6feb", width=0.85)
    mean = data.get("all", {}).get("words_per_caption_mean", 0)
    axes.set_xlabel("words per caption")
    axes.set_ylabel("captions")
    axes.set_title(f"{title}: caption length (mean {mean:.2f} words)", fontsize=10)
    return _png(figure)


def label_chart(data: dict[str, Any], *, title: str) -> bytes:
    """Clips per AudioSet label (the most frequent TOP_LABELS) as PNG."""
    rows = data.get("labels", [])[:TOP_LABELS]
    names = [row["name"] for row in rows][::-1]
    figure, axes = _figure((7, max(2.5, 0.22 * len(names) + 1)))
    if rows:
        axes.barh(names, [row["clips"] for row in rows][::-1], color="#1f6feb")
    else:
        axes.text(0.5, 0.5, "no clip has AudioSet labels", ha="center", va="center")
    axes.set_xlabel("clips")
    axes.set_title(f"{title}: clips per label (top {TOP_LABELS})", fontsize=10)
    axes.tick_params(axis="y", labelsize=7)
    return _png(figure)


def _figure(size: tuple[float, float]) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt.subplots(figsize=size, dpi=100)


def _png(figure: Any) -> bytes:
    from matplotlib import pyplot as plt

    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()
