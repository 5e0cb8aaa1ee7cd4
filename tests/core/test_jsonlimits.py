"""core.jsonlimits: JSON from outside is refused, naming the field, before it can cost a
500 or much memory."""

from __future__ import annotations

import pytest

from core.jsonlimits import MAX_DEPTH, JsonRefused, bounded_loads


def test_it_parses_ordinary_json() -> None:
    assert bounded_loads(b'{"tasks": [{"id": 12, "score": 0.5}]}', max_bytes=100) == {
        "tasks": [{"id": 12, "score": 0.5}]
    }


def test_it_refuses_a_body_over_its_size_before_parsing() -> None:
    with pytest.raises(JsonRefused, match="is 11 bytes; at most 10"):
        bounded_loads(b"[" * 11, max_bytes=10)


def test_it_names_a_number_too_long() -> None:
    body = '{"annotation": {"id": 1' + "0" * 300 + "}}"
    with pytest.raises(JsonRefused, match=r"annotation\.id is a number of 301 characters"):
        bounded_loads(body, max_bytes=10_000)


def test_it_refuses_a_number_of_4301_digits_without_a_value_error() -> None:
    with pytest.raises(JsonRefused, match=r"tasks\[0\] is a number of 4,301"):
        bounded_loads('{"tasks": [' + "9" * 4301 + "]}", max_bytes=10_000)


def test_it_names_where_nesting_goes_too_deep() -> None:
    body = '{"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}"
    with pytest.raises(JsonRefused) as refused:
        bounded_loads(body, max_bytes=10_000)
    assert (
        str(refused.value)
        == "a" + "[0]" * (MAX_DEPTH - 1) + f" nests deeper than {MAX_DEPTH} levels"
    )


def test_it_refuses_nesting_100000_deep() -> None:
    with pytest.raises(JsonRefused, match="nests deeper"):
        bounded_loads("[" * 100_000 + "]" * 100_000, max_bytes=1_000_000)


def test_it_refuses_nan() -> None:
    with pytest.raises(JsonRefused, match="NaN is not a JSON number"):
        bounded_loads('{"score": NaN}', max_bytes=100)
