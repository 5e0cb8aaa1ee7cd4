"""Pure scoring for the active-learning loop: no Django, no torch.

Ranking (which clips to caption next, higher priority first):

    random       a seeded shuffle: the baseline every other strategy is measured against
    uncertainty  the model's mean per-token entropy on its best caption
    margin       the beam margin: how little the best hypothesis beats the runner-up
                 (length-normalised beam scores); small margin = unsure
    committee    how much a committee of captions disagrees: the captions of two or more
                 models for the clip, or else the hypotheses of one beam; 1 - mean pairwise
                 CIDEr-D / 10
    diversity    label coverage: greedily picks the clip whose labels the corpus (and the
                 picks so far) cover least
    hybrid       uncertainty weighted by label coverage: greedily picks the clip with the
                 largest mean token entropy x coverage gain, so a batch does not spend itself
                 on many uncertain clips of the same under-learnt label

Flags (what a reviewer should look at first):

    model        the caption is far (CIDEr-D) from a suggestion the model was sure of;
                 on clips with enough captions for the consensus check it defers to that
                 check (people outvote the model), so it speaks for clips with few captions
    consensus    the caption agrees little with the clip's other captions (leave-one-out
                 CIDEr-D against them)
    hints        the caption mentions none of the clip's word hints, their lemmas or synonyms

CIDEr-D is modeling.ml.cider's (pycocoevalcap's `CiderScorer` arithmetic: n = 1..4, clipped
tf-idf vectors, Gaussian length penalty sigma 6, x10), the project's one implementation,
with document frequencies from a fixed corpus so many pairs can be scored without
rebuilding it.
`tests/active/test_scoring.py` checks it gives pycocoevalcap's `Cider` numbers to 1e-9 on a
fixture. Text goes through `tokens()`: lower case, PTB punctuation dropped, split on
white space, which is what the PTB tokenizer gives for plain captions (no Java here).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from modeling.ml import cider

K = TypeVar("K", bound=Hashable)

STRATEGIES = ("random", "uncertainty", "margin", "committee", "diversity", "hybrid")
_PUNCT = re.compile(r"[.,?!:;()\[\]{}\"`]|'(?!\w)|(?<!\w)'|--+|\.\.\.|(?<=\s)-(?=\s)")


# Text ------------------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    """Lower-cased words with PTB punctuation removed ("A dog's bark." -> a, dog's, bark)."""
    return _PUNCT.sub(" ", text.lower()).split()


def edit_distance(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Levenshtein distance (insert, delete, substitute cost 1) between two sequences:
    strings for characters, token lists for words."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i]
        for j, y in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


# CIDEr-D ---------------------------------------------------------------------------------


class CiderD:
    """CIDEr-D on caption texts, with document frequencies from a fixed corpus: `documents`
    is one list of captions per clip (pycocoevalcap takes them from the references it
    scores). The arithmetic is modeling.ml.cider's, the project's one CIDEr-D; this adds
    the text side (`tokens`).

    `score(candidate, references)` is the clip's CIDEr-D (0 to 10 for references that
    share the candidate's length)."""

    def __init__(self, documents: Iterable[Sequence[str]]):
        self._cider = cider.CiderD.from_documents(
            [[tokens(text) for text in document] for document in documents]
        )
        self._words: dict[str, list[str]] = {}

    def _tokens(self, text: str) -> list[str]:
        words = self._words.get(text)
        if words is None:
            words = tokens(text)
            if len(self._words) < 100_000:
                self._words[text] = words
        return words

    def score(self, candidate: str, references: Sequence[str]) -> float:
        return self._cider.score_against(
            self._tokens(candidate), [self._tokens(r) for r in references]
        )

    def pairwise_mean(self, captions: Sequence[str]) -> float:
        """Mean CIDEr-D of every ordered pair (each caption against each other one)."""
        pairs = [(a, b) for i, a in enumerate(captions) for j, b in enumerate(captions) if i != j]
        if not pairs:
            raise ValueError("Pairwise CIDEr-D needs two captions or more.")
        return sum(self.score(a, [b]) for a, b in pairs) / len(pairs)


def leave_one_out(captions: Sequence[str], cider: CiderD) -> list[float]:
    """Each caption's CIDEr-D against the clip's other captions (consensus)."""
    if len(captions) < 2:
        raise ValueError("Leave-one-out consensus needs two captions or more.")
    return [
        cider.score(text, [*captions[:i], *captions[i + 1 :]]) for i, text in enumerate(captions)
    ]


# Ranking ---------------------------------------------------------------------------------


@dataclass
class ClipEvidence:
    """What the ranking knows of one clip. A clip the model never captioned has no
    `mean_entropy` and no hypotheses."""

    key: Any
    mean_entropy: float | None = None
    hypotheses: list[Mapping[str, Any]] = field(default_factory=list)  # best first
    committee: list[str] = field(default_factory=list)  # best captions of other models
    labels: list[str] = field(default_factory=list)


def beam_margin(hypotheses: Sequence[Mapping[str, Any]]) -> float | None:
    """Best minus runner-up beam score (the length-normalised log-probability beam search
    ranks by; the raw log-probability when no score is stored). None with one hypothesis."""
    if len(hypotheses) < 2:
        return None

    def value(h: Mapping[str, Any]) -> float:
        return float(h["score"] if h.get("score") is not None else h["log_prob"])

    return max(0.0, value(hypotheses[0]) - value(hypotheses[1]))


def committee_disagreement(captions: Sequence[str], cider: CiderD) -> float | None:
    """1 - mean pairwise CIDEr-D / 10, clipped to [0, 1]; None with fewer than two members."""
    if len(captions) < 2:
        return None
    return min(1.0, max(0.0, 1.0 - cider.pairwise_mean(captions) / 10.0))


def committee_of(clip: ClipEvidence) -> list[str]:
    """Two or more models when there are, else the beam of the one model."""
    if clip.committee and clip.hypotheses:
        return [str(clip.hypotheses[0]["text"]), *clip.committee]
    if len(clip.committee) >= 2:
        return list(clip.committee)
    return [str(h["text"]) for h in clip.hypotheses]


def coverage_order(
    candidates: Mapping[K, Sequence[str]], covered: Mapping[str, int]
) -> list[tuple[K, float]]:
    """Greedy label coverage: repeatedly the clip whose labels are least covered, where a
    label seen c times is worth 1/(1+c); picking a clip covers its labels once more.
    Returns (clip, gain when picked), in pick order; ties go to the smaller key."""
    counts: dict[str, int] = defaultdict(int, covered)
    remaining = dict(candidates)
    order: list[tuple[K, float]] = []
    while remaining:
        best_key, best_gain = None, -1.0
        for key in sorted(remaining, key=_sort_key):
            gain = sum(1.0 / (1 + counts[label]) for label in set(remaining[key]))
            if gain > best_gain:
                best_key, best_gain = key, gain
        assert best_key is not None
        for label in set(remaining.pop(best_key)):
            counts[label] += 1
        order.append((best_key, best_gain))
    return order


def uncertain_coverage_order(
    entropies: Mapping[K, float], candidates: Mapping[K, Sequence[str]], covered: Mapping[str, int]
) -> list[tuple[K, float]]:
    """Greedy uncertainty x label coverage: repeatedly the clip with the largest
    entropy x gain, where gain is `coverage_order`'s (a label seen c times is worth
    1/(1+c)) and picking a clip covers its labels once more. A clip without labels counts
    as one unseen label (gain 1). Returns (clip, entropy x gain when picked) in pick order;
    ties go to the smaller key."""
    counts: dict[str, int] = defaultdict(int, covered)
    remaining = {key: set(candidates.get(key, ())) for key in entropies}
    order: list[tuple[K, float]] = []
    while remaining:
        best_key, best_value = None, -1.0
        for key in sorted(remaining, key=_sort_key):
            labels = remaining[key]
            gain = sum(1.0 / (1 + counts[label]) for label in labels) if labels else 1.0
            value = max(0.0, float(entropies[key])) * gain
            if value > best_value:
                best_key, best_value = key, value
        assert best_key is not None
        for label in remaining.pop(best_key):
            counts[label] += 1
        order.append((best_key, best_value))
    return order


def _sort_key(key: Any) -> tuple[str, Any]:
    return (type(key).__name__, key)


@dataclass
class Ranked:
    key: Any
    priority: float  # in (0, 1]: 1 for the first pick; what Hit.priority receives
    score: float | None  # the strategy's raw score (None: no evidence, ranked first)
    details: dict[str, Any]


def rank(
    strategy: str,
    clips: Sequence[ClipEvidence],
    *,
    cider: CiderD | None = None,
    covered: Mapping[str, int] | None = None,
    seed: int = 0,
) -> list[Ranked]:
    """Orders clips for captioning, best first. Clips without model evidence come before
    the others for the model-based strategies (the model has not heard them); among equals
    the smaller key goes first. `cider` is needed for committee."""
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}.")
    scored: list[tuple[Any, float | None, dict[str, Any]]] = []
    if strategy == "random":
        rng = random.Random(seed)
        shuffled = sorted(clips, key=lambda c: _sort_key(c.key))
        rng.shuffle(shuffled)
        n = len(shuffled)
        scored = [(c.key, float(n - i), {}) for i, c in enumerate(shuffled)]
    elif strategy == "diversity":
        order = coverage_order({c.key: c.labels for c in clips}, covered or {})
        scored = [(key, gain, {"coverage_gain": round(gain, 4)}) for key, gain in order]
    elif strategy == "hybrid":
        # clips the model has not captioned first (as for uncertainty), then the greedy order
        unseen = sorted((c.key for c in clips if c.mean_entropy is None), key=_sort_key)
        order = uncertain_coverage_order(
            {c.key: c.mean_entropy for c in clips if c.mean_entropy is not None},
            {c.key: c.labels for c in clips},
            covered or {},
        )
        scored = [(key, None, {}) for key in unseen] + [
            (key, value, {"entropy_x_coverage": round(value, 4)}) for key, value in order
        ]
    else:
        for clip in clips:
            if strategy == "uncertainty":
                value = clip.mean_entropy
                scored.append((clip.key, value, {"mean_entropy": value}))
            elif strategy == "margin":
                margin = beam_margin(clip.hypotheses)
                scored.append(
                    (clip.key, None if margin is None else -margin, {"beam_margin": margin})
                )
            else:
                if cider is None:
                    raise ValueError("The committee strategy needs a CIDEr-D corpus.")
                members = committee_of(clip)
                value = committee_disagreement(members, cider)
                scored.append((clip.key, value, {"disagreement": value, "members": len(members)}))
    if strategy not in ("random", "diversity", "hybrid"):
        # no evidence first, then highest score; stable on the key
        scored.sort(key=lambda row: _sort_key(row[0]))
        scored.sort(key=lambda row: (row[1] is not None, -(row[1] or 0.0)))
    n = len(scored)
    return [
        Ranked(key=key, priority=(n - i) / n, score=value, details=details)
        for i, (key, value, details) in enumerate(scored)
    ]


# Flags -----------------------------------------------------------------------------------

# Irregular plurals and past forms the suffix rules below would get wrong.
_IRREGULAR = {
    "men": "man", "women": "woman", "children": "child", "people": "person",
    "geese": "goose", "mice": "mouse", "feet": "foot", "teeth": "tooth", "oxen": "ox",
    "sheep": "sheep", "fish": "fish", "wolves": "wolf", "leaves": "leaf", "knives": "knife",
    "rang": "ring", "rung": "ring", "sang": "sing", "sung": "sing", "blew": "blow",
    "blown": "blow", "flew": "fly", "ran": "run", "spoke": "speak", "spoken": "speak",
    "hit": "hit", "bit": "bite", "fell": "fall", "struck": "strike", "drove": "drive",
    "was": "be", "were": "be", "is": "be", "are": "be", "has": "have", "had": "have",
}  # fmt: skip

# Sound words that mean the same to a listener; each group is one concept. Hints and
# captions match when they share a lemma or a group.
SYNONYM_GROUPS: tuple[frozenset[str], ...] = tuple(
    frozenset(group.split())
    for group in (
        "dog puppy hound canine pup",
        "bark woof yap yelp bay",
        "cat kitten feline",
        "meow mew miaow purr",
        "bird birdsong songbird",
        "chirp tweet twitter chirrup cheep warble",
        "speech speak talk voice say conversation chat narrate narration",
        "man male gentleman guy",
        "woman female lady",
        "child kid baby toddler infant",
        "car automobile vehicle",
        "engine motor",
        "idle idling rumble",
        "horn honk beep toot",
        "beep bleep",
        "siren alarm",
        "telephone phone ring ringtone",
        "knock tap rap",
        "hammer hammering pound",
        "clap clapping applause applaud",
        "thunder thunderstorm",
        "rain raindrop drizzle downpour",
        "wind gust breeze blow",
        "water stream trickle flow splash run",
        "clock tick ticktock",
        "music song melody",
        "machine device appliance mechanism",
        "laugh laughter giggle chuckle",
        "cry sob wail weep",
        "footstep step walk",
        "door slam",
    )
)


def lemma(word: str) -> str:
    """A light English lemmatiser for sound words: barks, barking, barked -> bark;
    puppies -> puppy; men -> man. Deterministic and dependency-free."""
    w = word.lower().strip("'")
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 5 and w.endswith("ing"):
        stem = w[:-3]
        if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
            stem = stem[:-1]  # humming -> hum
        return stem
    if len(w) > 4 and w.endswith("ed"):
        stem = w[:-2]
        if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
            stem = stem[:-1]
        return stem
    if len(w) > 4 and w.endswith(("ches", "shes", "sses", "xes", "zes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def concepts(words: Iterable[str]) -> set[str]:
    """Lemmas of the words, plus the synonym groups they fall in ("#3" for group 3)."""
    out: set[str] = set()
    for word in words:
        base = lemma(word)
        out.add(base)
        for number, group in enumerate(SYNONYM_GROUPS):
            if base in group or word.lower() in group:
                out.add(f"#{number}")
    return out


_STOP = frozenset(
    {"a", "an", "the", "of", "and", "or", "in", "on", "at", "to", "by", "with", "from", "for"}
    | {"sound", "sounds", "noise"}
)


def hint_words(hints: Iterable[str]) -> list[str]:
    """Content words of word hints and label names ("Beep, bleep" -> beep, bleep)."""
    words: list[str] = []
    for hint in hints:
        words.extend(w for w in tokens(hint.replace(",", " ").replace("/", " ")) if w not in _STOP)
    return words


def hint_mention(text: str, hints: Sequence[str]) -> list[str]:
    """The hint words the caption mentions, by lemma or synonym (empty: none)."""
    said = concepts(w for w in tokens(text) if w not in _STOP)
    return sorted({w for w in hint_words(hints) if concepts([w]) & said})


@dataclass(frozen=True)
class FlagThresholds:
    # a suggestion counts as confident when its mean token entropy is at most this
    model_max_entropy: float = 1.0
    # … and a caption is flagged when its CIDEr-D against that suggestion is below this
    model_min_cider: float = 0.05
    # leave-one-out CIDEr-D below this flags a caption among the clip's captions
    consensus_min_cider: float = 0.1
    # consensus needs at least this many captions on the clip (the caption included)
    consensus_min_captions: int = 3
    # flag captions that mention none of the clip's word hints (when it has some)
    hints: bool = True
    # skip the model check where the consensus check runs: the clip's other captions are
    # better evidence than one model's guess. On SynthScenes (benchmarks/active_learning.py
    # --flags-only) a small model's entropy was not calibrated: its "confident" suggestions
    # were often wrong and the check alone had precision ~0.4, dragging the checks together
    # from ~0.98 to ~0.54 on clips with five captions.
    model_defers_to_consensus: bool = True


@dataclass(frozen=True)
class Finding:
    kind: str  # model | consensus | hints
    reason: str  # what the reviewer reads
    evidence: dict[str, Any]


def caption_findings(
    *,
    text: str,
    others: Sequence[str] = (),
    suggestion: str | None = None,
    suggestion_entropy: float | None = None,
    hints: Sequence[str] = (),
    cider: CiderD,
    thresholds: FlagThresholds = FlagThresholds(),
    consensus: bool = True,
) -> list[Finding]:
    """Why a reviewer should look at this caption first (empty: no reason). `others` are
    the clip's other captions, `suggestion` the model's best caption for the clip.
    `consensus=False` leaves the CIDEr-D consensus check to the caller (the meaning check
    of active.flagmodel replaces it); the model check still defers to the clip's captions."""
    found: list[Finding] = []
    consensus_applies = len(others) + 1 >= thresholds.consensus_min_captions
    if (
        suggestion
        and not (thresholds.model_defers_to_consensus and consensus_applies)
        and suggestion_entropy is not None
        and suggestion_entropy <= thresholds.model_max_entropy
    ):
        similarity = cider.score(text, [suggestion])
        if similarity < thresholds.model_min_cider:
            found.append(
                Finding(
                    "model",
                    "Far from a confident model suggestion",
                    {
                        "suggestion": suggestion,
                        "mean_entropy": round(suggestion_entropy, 4),
                        "cider_d": round(similarity, 4),
                        "threshold": thresholds.model_min_cider,
                    },
                )
            )
    if consensus and consensus_applies:
        consensus_cider = cider.score(text, list(others))
        if consensus_cider < thresholds.consensus_min_cider:
            found.append(
                Finding(
                    "consensus",
                    "Disagrees with the clip's other captions",
                    {
                        "leave_one_out_cider_d": round(consensus_cider, 4),
                        "other_captions": len(others),
                        "threshold": thresholds.consensus_min_cider,
                    },
                )
            )
    words = hint_words(hints)
    if thresholds.hints and words and not hint_mention(text, hints):
        found.append(
            Finding(
                "hints",
                "Mentions none of the clip's word hints",
                {"hints": sorted(set(words))},
            )
        )
    return found


def precision_recall(flagged: set[K], bad: set[K]) -> tuple[float | None, float | None]:
    """Precision and recall of flags against known bad items (None when undefined)."""
    hits = len(flagged & bad)
    precision = hits / len(flagged) if flagged else None
    recall = hits / len(bad) if bad else None
    return precision, recall
