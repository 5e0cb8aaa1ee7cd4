"""Word vocabulary for captions: specials, min-count filtering, encode/decode, dict round trip."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
# Fixed ids: models and losses rely on <pad> being 0 (embedding padding_idx, ignore_index).
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3

# Captions are compared lower-cased and punctuation-free (the COCO caption tools' convention), so
# the vocabulary splits on anything that is not a letter, digit or in-word apostrophe.
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


def tokenize(text: str) -> list[str]:
    """Lower-case words of ``text`` without punctuation: "A dog barks!" -> ["a", "dog", "barks"]."""
    return _WORD.findall(text.lower())


class Vocabulary:
    """Maps words to ids and back. Ids 0..3 are <pad>, <bos>, <eos>, <unk>."""

    def __init__(self, words: Sequence[str], *, max_length: int = 30) -> None:
        if tuple(words[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {', '.join(SPECIALS)}")
        if len(set(words)) != len(words):
            dupes = sorted(w for w, n in Counter(words).items() if n > 1)
            raise ValueError(f"duplicate words in vocabulary: {', '.join(dupes[:5])}")
        if max_length < 1:
            raise ValueError(f"max_length must be at least 1, got {max_length}")
        self.words: list[str] = list(words)
        # Longest caption in words; encode() truncates to it (plus <bos>/<eos>).
        self.max_length = max_length
        self._index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(
        cls, texts: Iterable[str | Sequence[str]], *, min_count: int = 1, max_length: int = 30
    ) -> Vocabulary:
        """Vocabulary of the words seen at least ``min_count`` times in ``texts``.

        ``texts`` are raw captions (tokenised here) or already-tokenised word lists. Words are
        ordered by decreasing frequency, then alphabetically, so the ids are deterministic.
        """
        counts: Counter[str] = Counter()
        for text in texts:
            words = tokenize(text) if isinstance(text, str) else list(text)
            counts.update(words[:max_length])
        for special in SPECIALS:
            counts.pop(special, None)
        kept = sorted(
            (w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w)
        )
        return cls([*SPECIALS, *kept], max_length=max_length)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Vocabulary)
            and self.words == other.words
            and self.max_length == other.max_length
        )

    def __hash__(self) -> int:
        return hash((tuple(self.words), self.max_length))

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} words, max_length={self.max_length})"

    def id(self, word: str) -> int:
        return self._index.get(word, UNK_ID)

    def encode(self, text: str | Sequence[str], *, add_specials: bool = True) -> list[int]:
        """Ids of a caption, truncated to max_length words, wrapped in <bos> ... <eos>."""
        words = tokenize(text) if isinstance(text, str) else list(text)
        ids = [self.id(w) for w in words[: self.max_length]]
        return [BOS_ID, *ids, EOS_ID] if add_specials else ids

    def decode(self, ids: Iterable[int]) -> str:
        """Caption text for ``ids``: stops at the first <eos>, drops <pad>/<bos>, keeps <unk>."""
        words = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            words.append(self.words[i] if 0 <= i < len(self.words) else UNK)
        return " ".join(words)

    def encode_words(self, phrases: Iterable[str], *, limit: int | None = None) -> list[int]:
        """Distinct known word ids of label names, in order: attribute words for TopDown.

        "Vehicle horn, car horn, honking" contributes vehicle, horn, car, honking. Unknown words
        are dropped (an <unk> attribute carries no information).
        """
        seen: dict[int, None] = {}
        for phrase in phrases:
            for word in tokenize(phrase):
                i = self._index.get(word)
                if i is not None and i >= len(SPECIALS):
                    seen.setdefault(i)
        ids = list(seen)
        return ids[:limit] if limit is not None else ids

    def to_dict(self) -> dict[str, Any]:
        return {"words": list(self.words), "max_length": self.max_length}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocabulary:
        try:
            return cls(list(data["words"]), max_length=int(data["max_length"]))
        except KeyError as exc:
            raise ValueError(f"vocabulary dict is missing '{exc.args[0]}'") from None
