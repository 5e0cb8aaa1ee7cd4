"""The small text steps of the pipeline: normalisation, the final period, training text.

No Django here: the modeling code reuses these functions.
"""

from __future__ import annotations

import re
import unicodedata

# the caption gate checks the same normal form (annotation.rules.gate), so it lives below both
from core.text import normalise

__all__ = ["drop_final_period", "normalise", "train_text"]

_SPACES = re.compile(r"\s+")
# Punctuation that trains nothing; an apostrophe or hyphen between letters or digits is
# part of the word ("man's", "high-pitched", "twenty-one") and stays.
_INNER = re.compile(r"(?<=\w)['-](?=\w)")


def drop_final_period(text: str) -> str:
    """AudioCaps captions end without a period: "A dog barks." -> "A dog barks". An
    ellipsis at the end goes too; "!" and "?" stay (the training text drops them)."""
    return text.rstrip(" .\u2026")


def train_text(text: str) -> str:
    """Lower-case, punctuation removed, single spaces: what a captioning model trains on."""
    kept = []
    lowered = text.lower()
    inner = {m.start() for m in _INNER.finditer(lowered)}
    for index, char in enumerate(lowered):
        category = unicodedata.category(char)
        # P: punctuation; S: symbols (+, =, $, emoji) that no word is made of
        if category[0] in ("P", "S") and index not in inner:
            kept.append(" ")
        else:
            kept.append(char)
    return _SPACES.sub(" ", "".join(kept)).strip()
