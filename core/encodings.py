"""Recognising UTF-16 text before reading a file as UTF-8. No Django here.

Spreadsheets save "Unicode text" as UTF-16, often without a byte-order mark. Such a file
is valid UTF-8 as bytes: every ASCII character comes with a NUL beside it. Read as UTF-8
it turns into a header of "a\\x00u\\x00d…" or a YouTube id that is "not 11 characters",
messages that never say what is wrong. Readers of CSV uploads (segment lists, caption
lists, word labels) ask `utf16_description` first and refuse the file saying so.
"""

from __future__ import annotations

# how much of a file the guess reads: enough for a header and some rows
SNIFF_BYTES = 4096
# UTF-16 text that is mostly ASCII has a NUL in at least this share of one byte column
# (a high byte of 0 for every ASCII character), and almost none in the other
_NUL_SHARE = 0.3
_OTHER_COLUMN_SHARE = 0.05


def utf16_description(head: bytes) -> str | None:
    """ "UTF-16 (little-endian, no byte-order mark)" and the like when the first bytes of a
    file (`head`, SNIFF_BYTES or so) are UTF-16 text, else None."""
    if head.startswith(b"\xff\xfe"):
        return "UTF-16 (little-endian, with a byte-order mark)"
    if head.startswith(b"\xfe\xff"):
        return "UTF-16 (big-endian, with a byte-order mark)"
    pairs = len(head) // 2
    if pairs == 0:
        return None
    even = head[0 : 2 * pairs : 2].count(0) / pairs  # first byte of each pair
    odd = head[1 : 2 * pairs : 2].count(0) / pairs
    if odd >= _NUL_SHARE and even <= _OTHER_COLUMN_SHARE:
        return "UTF-16 (little-endian, no byte-order mark)"
    if even >= _NUL_SHARE and odd <= _OTHER_COLUMN_SHARE:
        return "UTF-16 (big-endian, no byte-order mark)"
    return None


def utf16_refusal(head: bytes) -> str | None:
    """The end of a message refusing a UTF-16 file ("is UTF-16 … text; save it as UTF-8"),
    or None when `head` does not look like UTF-16."""
    found = utf16_description(head)
    if found is None:
        return None
    return f"is {found} text; save it as UTF-8 (a spreadsheet's “CSV UTF-8”) and try again"
