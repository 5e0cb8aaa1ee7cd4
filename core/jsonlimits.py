"""JSON from outside, parsed within bounds. No Django here.

Python's json module takes any size, any depth (until a RecursionError, a 500) and any
number (an id of 10**300 parses, then overflows the database's integer; past 4,300
digits int() raises ValueError, another 500). bounded_loads refuses each before it costs
much: the size before parsing, numbers as they are parsed (too long: kept as a marker the
walk after parsing finds, so the message names the field), nesting by an iterative walk,
and the parser's own recursion limit as a last resort. The refusal names the field
(`tasks[3].data.clip_id`) where it can.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 32
MAX_NUMBER_CHARS = 32  # an id up to 2**63 has 19 digits; a float's repr fewer than 25


class JsonRefused(ValueError):
    """JSON that is malformed or out of bounds; the message says which and where."""


class _LongNumber:
    def __init__(self, text: str) -> None:
        self.text = text


def _number(kind: type) -> Any:
    def parse(text: str) -> Any:
        return _LongNumber(text) if len(text) > MAX_NUMBER_CHARS else kind(text)

    return parse


def _constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not a JSON number")


def _path(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)


def _walk(value: Any) -> None:
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, _LongNumber):
            raise JsonRefused(
                f"{path or 'the body'} is a number of {len(item.text):,} characters "
                f"(at most {MAX_NUMBER_CHARS})"
            )
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise JsonRefused(f"{path or 'the body'} nests deeper than {MAX_DEPTH} levels")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend((child, _path(path, key), depth + 1) for key, child in pairs)


def bounded_loads(data: bytes | str, *, max_bytes: int, what: str = "The body") -> Any:
    """`data` parsed as JSON; JsonRefused when it is larger than `max_bytes`, malformed,
    nested deeper than MAX_DEPTH or holds a number longer than MAX_NUMBER_CHARS."""
    if len(data) > max_bytes:
        raise JsonRefused(f"{what} is {len(data):,} bytes; at most {max_bytes:,}")
    try:
        value = json.loads(
            data,
            parse_int=_number(int),
            parse_float=_number(float),
            parse_constant=_constant,
        )
    except RecursionError:
        raise JsonRefused(f"{what} nests deeper than {MAX_DEPTH} levels") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise JsonRefused(f"{what} is not JSON ({exc})") from None
    _walk(value)
    return value
