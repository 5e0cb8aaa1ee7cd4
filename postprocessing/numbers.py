"""Numbers to words, the AudioCaps way (num2words), for whatever a caption writer types.

num2words takes a number, not text: ``num2words("3rd")``, ``"1990s"``, ``"10%"`` and
``"1,000"`` all raise. So each number is parsed here first (grouping commas, decimals, a
currency sign, a percent sign, an ordinal or plural suffix, a time of day) and only the
parsed value goes to num2words:

    3rd → third            1990s → nineteen nineties     '90s / 90's → nineties
    10% → ten percent      1,000 → one thousand           2.5 → two point five
    $5 → five dollars      $5.50 → five dollars and fifty cents
    in 1999 → in nineteen ninety-nine (years after in/since/from/…)
    3:30 → three thirty    007 → zero zero seven          -4 → minus four
    mp3 → mp three         5kg → five kg

Only ASCII digits are read (NFKC normalisation, an earlier step, folds full-width digits
to ASCII); a number of 16 digits or more is read digit by digit. No Django here: the
modeling code reuses this module.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from num2words import num2words

# Words before a four-digit number that make it a year ("in 1999", not "in 1,999").
_YEAR_CUES = frozenset(
    {"in", "since", "from", "until", "till", "by", "of", "year", "circa", "around"}
    | {"early", "late", "mid", "before", "after", "during"}
)
# sign -> (singular, plural, subunit singular, subunit plural)
_CURRENCIES: dict[str, tuple[str, str, str, str]] = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "€": ("euro", "euros", "cent", "cents"),
    "¥": ("yen", "yen", "sen", "sen"),
}
_DIGIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]

_TIME = r"(?P<hour>[01]?[0-9]|2[0-4]):(?P<minute>[0-5][0-9])(?![0-9])"
_NUMBER = r"""
    (?P<sign>(?<![^\s(\[])[-\u2212])?         # a minus (or U+2212) only where a word could start
    (?P<currency>[$£€¥])?
    (?P<apostrophe>')?                         # '90s
    (?:
        (?P<digits>[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?P<fraction>\.[0-9]+)?
      | (?P<bare_fraction>\.[0-9]+)           # .5
    )
    (?P<suffix>%|(?:st|nd|rd|th)(?![a-z])|'?s(?![a-z]))?
"""
_PATTERN = re.compile(rf"(?:{_TIME})|(?:{_NUMBER})", re.VERBOSE | re.IGNORECASE)


def numbers_to_words(text: str) -> str:
    """The text with every number written out in English words."""
    if not any("0" <= char <= "9" for char in text):
        return text
    return _PATTERN.sub(_replace, text)


def _replace(match: re.Match[str]) -> str:
    text, start, end = match.string, match.start(), match.end()
    if match.group("hour") is not None:
        words = _time(int(match.group("hour")), int(match.group("minute")))
    else:
        words = _number(match, preceding=text[:start])
    # Keep words apart from letters the number was glued to: "mp3" -> "mp three".
    if start > 0 and text[start - 1].isalpha():
        words = " " + words
    if end < len(text) and text[end].isalpha():
        words += " "
    return words


def _number(match: re.Match[str], *, preceding: str) -> str:
    digits = (match.group("digits") or "").replace(",", "")
    fraction = match.group("fraction") or match.group("bare_fraction") or ""
    suffix = (match.group("suffix") or "").lower()
    currency = match.group("currency")
    apostrophe = match.group("apostrophe") or ""
    sign = "minus " if match.group("sign") else ""

    if suffix in ("s", "'s") and not fraction:
        value = int(digits)
        if len(digits) == 2 and (apostrophe or value % 10 == 0):
            return sign + _plural(_words(value))  # '90s, 80's, 60s -> the decade
        if value in (100, 1000, 1_000_000):
            return sign + apostrophe + _plural(_words(value).removeprefix("one "))  # hundreds
        if len(digits) == 4 and 1000 < value <= 2999:
            return sign + _plural(_year(value))  # 1990s -> nineteen nineties
        return sign + apostrophe + _plural(_words(value))
    if suffix in ("st", "nd", "rd", "th") and not fraction:
        return sign + apostrophe + _ordinal(int(digits))
    if currency:
        return sign + apostrophe + _money(digits, fraction, currency) + _suffix_words(suffix)
    if fraction:
        words = _decimal((digits or "0") + fraction)
    elif len(digits) > 1 and digits.startswith("0"):
        words = " ".join(_DIGIT_WORDS[int(d)] for d in digits)  # 007, 0800
    elif _is_year(digits, match.group("digits") or "", preceding):
        words = _year(int(digits))
    else:
        words = _words(int(digits))
    return sign + apostrophe + words + _suffix_words(suffix)


def _suffix_words(suffix: str) -> str:
    return " percent" if suffix == "%" else ""


def _is_year(digits: str, written: str, preceding: str) -> bool:
    if len(digits) != 4 or "," in written or not 1100 <= int(digits) <= 2099:
        return False
    previous = preceding.rstrip().rsplit(None, 1)[-1:] or [""]
    return previous[0].lower().strip("(,") in _YEAR_CUES


def _n2w(value: int | Decimal, **kwargs: str) -> str:
    # num2words writes "one thousand, nine hundred": no commas inside one number
    return str(num2words(value, **kwargs)).replace(",", "")


def _words(value: int) -> str:
    if value >= 10**15:  # serial and phone numbers: nobody says "octodecillion"
        return " ".join(_DIGIT_WORDS[int(d)] for d in str(value))
    try:
        return _n2w(value)
    except (OverflowError, NotImplementedError, InvalidOperation):
        return " ".join(_DIGIT_WORDS[int(d)] for d in str(value))


def _ordinal(value: int) -> str:
    try:
        return _n2w(value, to="ordinal")
    except (OverflowError, NotImplementedError, InvalidOperation):
        return _words(value) + "th"


def _year(value: int) -> str:
    return _n2w(value, to="year")


def _decimal(written: str) -> str:
    integer, _, decimals = written.partition(".")
    if len(integer) > 15:
        return _words(int(integer)) + " point " + " ".join(_DIGIT_WORDS[int(d)] for d in decimals)
    try:
        return _n2w(Decimal(written))
    except (OverflowError, NotImplementedError, InvalidOperation):
        return _words(int(integer)) + " point " + " ".join(_DIGIT_WORDS[int(d)] for d in decimals)


def _money(digits: str, fraction: str, currency: str) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[currency]
    units = int(digits or "0")
    words = f"{_words(units)} {one if units == 1 else many}"
    if not fraction:
        return words
    if len(fraction) != 3:  # "$2.5" or "$1.999": not cents, read the amount as a decimal
        return f"{_decimal((digits or '0') + fraction)} {many}"
    cents = int(fraction[1:])
    if cents == 0:
        return words
    cents_words = f"{_words(cents)} {sub_one if cents == 1 else sub_many}"
    return cents_words if units == 0 else f"{words} and {cents_words}"


def _time(hour: int, minute: int) -> str:
    if minute == 0:
        return f"{_words(hour)} o'clock"
    if minute < 10:
        return f"{_words(hour)} oh {_words(minute)}"
    return f"{_words(hour)} {_words(minute)}"


def _plural(words: str) -> str:
    head, _, last = words.rpartition(" ")
    if last.endswith("y"):
        last = last[:-1] + "ies"
    elif last.endswith(("x", "s")):
        last += "es"
    else:
        last += "s"
    return f"{head} {last}" if head else last
