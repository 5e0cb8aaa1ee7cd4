"""MAAC's keyword vocabulary: nouns and verbs of the training captions, top N, multi-hot targets.

POS tagging happens outside this package (the Django side runs spaCy); here a caption arrives
as ``(word, pos, lemma)`` triples with universal POS tags, e.g. spaCy's ``token.text``,
``token.pos_`` and ``token.lemma_``. Following the paper (MODELS.md section 3):

- nouns are kept as written (lower-cased): "dogs" and "dog" stay different keywords, because a
  plural carries meaning (several dogs bark);
- verbs are reduced to their lemma: "barks", "barking", "barked" are all "bark";
- generic words are dropped (``STOP_KEYWORDS``: make, go, other, ...);
- the N most frequent keywords form the vocabulary (300 in the paper), ties broken
  alphabetically so the ids are deterministic;
- a clip's target is the multi-hot union of the keywords of all its captions.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import Tensor

# (word, universal POS tag, lemma) of one token.
TaggedToken = tuple[str, str, str]

NOUN_TAGS = frozenset({"NOUN"})
VERB_TAGS = frozenset({"VERB"})

# Words too generic to say anything about a sound: the paper's examples (make, go, others)
# and their kin. Verbs are matched as lemmas, nouns as written.
STOP_KEYWORDS = frozenset(
    {
        "make",
        "go",
        "other",
        "others",
        "do",
        "be",
        "have",
        "get",
        "come",
        "take",
        "seem",
        "sound",
        "sounds",
        "noise",
        "noises",
        "thing",
        "things",
        "something",
        "someone",
        "somebody",
        "anything",
        "everything",
        "one",
        "ones",
        "lot",
        "lots",
        "kind",
        "type",
        "background",
        "time",
        "times",
        "way",
    }
)

_ALPHA = re.compile(r"^[a-z][a-z'-]*$")


def caption_keywords(
    tokens: Iterable[TaggedToken], *, stop_words: frozenset[str] = STOP_KEYWORDS
) -> list[str]:
    """Keywords of one tagged caption, in order, repeats kept (they count for the top N)."""
    keywords = []
    for word, pos, lemma in tokens:
        if pos in NOUN_TAGS:
            keyword = word.lower()
        elif pos in VERB_TAGS:
            keyword = (lemma or word).lower()
        else:
            continue
        if keyword in stop_words or not _ALPHA.match(keyword):
            continue
        keywords.append(keyword)
    return keywords


class KeywordVocabulary:
    """The N keywords a keyword encoder predicts; ids 0..N-1 index its outputs."""

    def __init__(self, words: Sequence[str]) -> None:
        if not words:
            raise ValueError("a keyword vocabulary needs at least one keyword")
        if len(set(words)) != len(words):
            dupes = sorted(w for w, n in Counter(words).items() if n > 1)
            raise ValueError(f"duplicate keywords: {', '.join(dupes[:5])}")
        self.words: list[str] = list(words)
        self._index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(
        cls,
        tagged_captions: Iterable[Iterable[TaggedToken]],
        *,
        size: int = 300,
        stop_words: frozenset[str] = STOP_KEYWORDS,
    ) -> KeywordVocabulary:
        """The ``size`` most frequent keywords over all training captions."""
        if size < 1:
            raise ValueError(f"keyword vocabulary size must be at least 1, got {size}")
        counts: Counter[str] = Counter()
        for caption in tagged_captions:
            counts.update(caption_keywords(caption, stop_words=stop_words))
        if not counts:
            raise ValueError("the captions contain no nouns or verbs to take keywords from")
        ranked = sorted(counts, key=lambda w: (-counts[w], w))
        return cls(ranked[:size])

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeywordVocabulary) and self.words == other.words

    def __hash__(self) -> int:
        return hash(tuple(self.words))

    def __repr__(self) -> str:
        return f"KeywordVocabulary({len(self)} keywords)"

    def encode(self, keywords: Iterable[str]) -> list[int]:
        """Distinct ids of the known keywords, first occurrence first; others are dropped."""
        seen: dict[int, None] = {}
        for word in keywords:
            i = self._index.get(word)
            if i is not None:
                seen.setdefault(i)
        return list(seen)

    def targets(
        self,
        tagged_captions: Iterable[Iterable[TaggedToken]],
        *,
        stop_words: frozenset[str] = STOP_KEYWORDS,
    ) -> Tensor:
        """(N,) float multi-hot: the union of the keywords of one clip's captions."""
        target = torch.zeros(len(self))
        for caption in tagged_captions:
            ids = self.encode(caption_keywords(caption, stop_words=stop_words))
            target[ids] = 1.0
        return target

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.words[int(i)] for i in ids]

    def to_dict(self) -> dict[str, Any]:
        return {"words": list(self.words)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KeywordVocabulary:
        try:
            return cls(list(data["words"]))
        except KeyError:
            raise ValueError("keyword vocabulary dict is missing 'words'") from None


def top_keywords(probabilities: Tensor, k: int) -> Tensor:
    """(B, N) keyword probabilities (or logits) -> (B, k) ids of the k highest, best first."""
    if not 1 <= k <= probabilities.size(-1):
        raise ValueError(f"k={k} must be between 1 and the {probabilities.size(-1)} keywords")
    return probabilities.topk(k, dim=-1).indices
