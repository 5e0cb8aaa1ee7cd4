"""CIDEr-D as a per-caption reward, with document frequencies fixed on a reference corpus.

Self-critical training scores a few captions per clip at every step. pycocoevalcap's ``Cider``
recomputes the n-gram document frequencies from whatever references it is handed, so scoring
one batch would weigh n-grams by that batch alone, and it re-counts every reference each call.
``CiderD`` computes the same formula (pycocoevalcap's ``CiderScorer``: tf-idf vectors of 1..4-
grams, clipped cosine similarity, the Gaussian length penalty with sigma 6 on its length count,
the mean over n and over references, times 10) with the document frequencies and reference
vectors computed once on the training references, as SCST implementations do. Given the same
reference set it returns exactly pycocoevalcap's per-caption scores (tests check this).

Captions are word lists (lower-cased, punctuation-free: ``modeling.ml.vocab.tokenize``).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

N = 4
SIGMA = 6.0

Ngram = tuple[str, ...]


def _counts(words: Sequence[str]) -> Counter[Ngram]:
    counts: Counter[Ngram] = Counter()
    for k in range(1, N + 1):
        for i in range(len(words) - k + 1):
            counts[tuple(words[i : i + k])] += 1
    return counts


class _Vector:
    """tf-idf weights per n-gram order, their norms and pycocoevalcap's length count."""

    __slots__ = ("length", "norms", "weights")

    def __init__(self, counts: Counter[Ngram], idf: Mapping[Ngram, float], default: float):
        self.weights: list[dict[Ngram, float]] = [{} for _ in range(N)]
        norms = [0.0] * N
        length = 0
        for ngram, tf in counts.items():
            order = len(ngram) - 1
            weight = float(tf) * idf.get(ngram, default)
            self.weights[order][ngram] = weight
            norms[order] += weight * weight
            if order == 1:  # pycocoevalcap counts bigrams as the "length"; kept for equality
                length += tf
        self.norms = [math.sqrt(n) for n in norms]
        self.length = length


class CiderD:
    """CIDEr-D of candidate captions against the references of their clip.

    ``references`` maps a clip id to its reference captions (word lists); they are both the
    comparison set of each clip and the corpus the document frequencies come from.
    ``CiderD.from_documents`` takes the document frequencies from any corpus (one list of
    captions per clip) and scores against references passed per call (``score_against``):
    the flags and ranking of active/ score many ad hoc pairs that way. Both are the one
    CIDEr-D of the project.
    """

    def __init__(self, references: Mapping[str, Sequence[Sequence[str]]]) -> None:
        if not references:
            raise ValueError("CIDEr-D needs at least one clip with references")
        empty = [key for key, refs in references.items() if not refs]
        if empty:
            raise ValueError(f"clip {empty[0]!r} has no reference captions")
        counted = {key: [_counts(list(ref)) for ref in refs] for key, refs in references.items()}
        self._set_frequencies(counted.values())
        self.refs = {
            key: [_Vector(ref, self.idf, self.ref_len) for ref in refs]
            for key, refs in counted.items()
        }

    @classmethod
    def from_documents(cls, documents: Iterable[Sequence[Sequence[str]]]) -> CiderD:
        """Document frequencies from `documents` (one list of word lists per clip), no
        clips of its own: score with ``score_against``."""
        counted = [[_counts(list(words)) for words in document] for document in documents]
        if not counted:
            raise ValueError("CIDEr-D needs a corpus of at least one clip's captions.")
        self = cls.__new__(cls)
        self._set_frequencies(counted)
        self.refs = {}
        return self

    def _set_frequencies(self, documents: Iterable[Sequence[Counter[Ngram]]]) -> None:
        document_frequency: defaultdict[Ngram, int] = defaultdict(int)
        size = 0
        for refs in documents:
            size += 1
            for ngram in {g for ref in refs for g in ref}:
                document_frequency[ngram] += 1
        self.ref_len = math.log(float(size))
        # idf of an n-gram; one never seen in the references counts as seen once (log 1 = 0)
        self.idf = {
            g: self.ref_len - math.log(max(1.0, df)) for g, df in document_frequency.items()
        }
        self._cache: dict[tuple[str, ...], _Vector] = {}

    def __contains__(self, clip_id: object) -> bool:
        return clip_id in self.refs

    def vector(self, words: Sequence[str]) -> _Vector:
        key = tuple(words)
        cached = self._cache.get(key)
        if cached is None:
            cached = _Vector(_counts(key), self.idf, self.ref_len)
            if len(self._cache) < 100_000:
                self._cache[key] = cached
        return cached

    @staticmethod
    def _against(hyp: _Vector, refs: Sequence[_Vector]) -> float:
        total = 0.0
        for ref in refs:
            penalty = math.exp(-((hyp.length - ref.length) ** 2) / (2 * SIGMA**2))
            for order in range(N):
                ref_weights = ref.weights[order]
                dot = sum(
                    min(w, ref_weights.get(g, 0.0)) * ref_weights.get(g, 0.0)
                    for g, w in hyp.weights[order].items()
                )
                if hyp.norms[order] != 0 and ref.norms[order] != 0:
                    dot /= hyp.norms[order] * ref.norms[order]
                total += dot * penalty
        return total / N / len(refs) * 10.0

    def score(self, candidate: Sequence[str], clip_id: str) -> float:
        try:
            refs = self.refs[clip_id]
        except KeyError:
            raise KeyError(f"no references for clip {clip_id!r}") from None
        return self._against(_Vector(_counts(list(candidate)), self.idf, self.ref_len), refs)

    def score_against(self, candidate: Sequence[str], references: Sequence[Sequence[str]]) -> float:
        """CIDEr-D of `candidate` against `references` (word lists) with this corpus's
        document frequencies."""
        if not references:
            raise ValueError("CIDEr-D needs at least one reference.")
        return self._against(self.vector(candidate), [self.vector(r) for r in references])

    def scores(self, candidates: Sequence[Sequence[str]], clip_ids: Sequence[str]) -> list[float]:
        if len(candidates) != len(clip_ids):
            raise ValueError(f"{len(candidates)} candidates but {len(clip_ids)} clip ids")
        return [self.score(c, k) for c, k in zip(candidates, clip_ids, strict=True)]
