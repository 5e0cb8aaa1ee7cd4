"""Text as it is stored and as it leaves: the normal form post-processing stores, which the
caption gate (annotation.rules.gate) checks too, and the one cell escape every CSV export
writes through. No Django here.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

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


# Spreadsheet cells (OWASP, "CSV Injection"): Excel, LibreOffice and Google Sheets run a
# cell starting with = + - @ (or a tab or carriage return, which they may skip) as a
# formula, also after spaces and invisible characters they skip or that NFKC folds away,
# and also when the character is a full-width or small form NFKC folds to one of those.
_FORMULA_STARTS = frozenset("=+-@\t\r")
# A cell of letters, digits, "_", "." and "-" only cannot call a function, reach another
# sheet or a server (no parenthesis, "!", "|" or quote): a YouTube id such as
# "-5weqk40jaI" or a negative number. These stay as they are, so an imported AudioCaps
# file (2,406 of whose train rows have such an id) comes back byte for byte.
_INERT = re.compile(r"[A-Za-z0-9_.-]*", re.ASCII)


def starts_formula(value: str) -> bool:
    """Whether a spreadsheet may read `value` as a formula: its first visible character,
    once NFKC-normalised, starts one (a leading tab or carriage return counts)."""
    first = value[:1]
    if first in ("\t", "\r"):
        return True
    if first.isascii() and first.isalnum():  # most cells: no need to normalise
        return False
    visible = normalise(value)
    return visible[:1] in _FORMULA_STARTS


def spreadsheet_cell(value: Any) -> str:
    """`value` as a CSV cell no spreadsheet evaluates: OWASP's escape, a leading
    apostrophe, on text that would start a formula, unless it is inert (_INERT)."""
    text = "" if value is None else str(value)
    if starts_formula(text) and not _INERT.fullmatch(text):
        return "'" + text
    return text


class SafeCsvWriter:
    """csv.writer whose every cell goes through spreadsheet_cell: what each export writer
    uses, so no column (captions, file names, labels, reasons) is left out."""

    def __init__(self, handle: Any, **kwargs: Any) -> None:
        self._writer = csv.writer(handle, **kwargs)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([spreadsheet_cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


# text-direction embeddings, overrides, isolates and marks (annotation.rules' "bidi" rule)
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def file_name_problem(name: str) -> str:
    """Why a file name cannot name a clip ("" when it can), said so the message can name
    the file: a control character or line break (it would add lines to an export's
    SHA256SUMS and break its CSV rows) or a text-direction control (a name that reads
    otherwise than it is)."""
    for char in name:
        category = unicodedata.category(char)
        if category in ("Cc", "Zl", "Zp", "Cs") or char in _BIDI:
            kind = "a text-direction control" if char in _BIDI else "a control character"
            return (
                f"the file name holds {kind} (U+{ord(char):04X}); rename the file without it "
                "and import it again"
            )
    return ""


def checksum_line(digest: str, path: str) -> str:
    """One `sha256sum -c` line. A path holding a backslash, a line feed or a carriage
    return is escaped as GNU coreutils writes it (the line starts with a backslash; \\\\,
    \\n and \\r inside), so a name can never add or break a line."""
    if any(char in path for char in "\\\n\r"):
        escaped = path.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest}  {escaped}\n"
    return f"{digest}  {path}\n"
