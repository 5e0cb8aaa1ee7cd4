"""The small text steps of the pipeline: normalisation, the final period, training text.

No Django here: the modeling code reuses these functions.
"""

from __future__ import annotations

import re
import unicodedata

# Typographic quotes, primes and accents people type for quotes and apostrophes.
_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u00b4": "'",
        "\u0060": "'",
        "\u201c": '"',  # “
        "\u201d": '"',  # ”
        "\u201e": '"',  # „
        "\u2033": '"',  # ″
    }
)
_SPACES = re.compile(r"\s+")
# Punctuation that trains nothing; an apostrophe or hyphen between letters or digits is
# part of the word ("man's", "high-pitched", "twenty-one") and stays.
_INNER = re.compile(r"(?<=\w)['-](?=\w)")


def normalise(text: str) -> str:
    """NFKC (full-width letters and digits, ligatures, non-breaking spaces fold to plain
    ones), straight quotes, no invisible format characters (zero-width spaces, soft
    hyphens, byte-order marks, direction marks), single spaces, no surrounding space."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    text = "".join(
        " " if unicodedata.category(char) in ("Cc", "Zl", "Zp") else char
        for char in text
        if unicodedata.category(char) != "Cf"
    )
    return _SPACES.sub(" ", text).strip()


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
