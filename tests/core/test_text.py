"""core.text: the normal form, the spreadsheet cell escape and the checksum line."""

from __future__ import annotations

import io

import pytest

from core.text import SafeCsvWriter, checksum_line, file_name_problem, spreadsheet_cell


@pytest.mark.parametrize(
    "value",
    ["=1+1", "+1", "@SUM(A1)", "-2+3+cmd|' /C calc'!A0", "\t=1", "\r=1", " =1", "\u2002=1",
     "\u200b@x", "\uff1d1", "\ufe62cmd|x"],
)  # fmt: skip
def test_it_escapes_a_cell_a_spreadsheet_would_run(value: str) -> None:
    assert spreadsheet_cell(value) == "'" + value


@pytest.mark.parametrize("value", ["-5weqk40jaI", "-1.5", "a dog barks", "12", "", "O'Neil"])
def test_it_keeps_inert_and_plain_cells(value: str) -> None:
    assert spreadsheet_cell(value) == value


def test_the_writer_escapes_every_column() -> None:
    out = io.StringIO()
    SafeCsvWriter(out, lineterminator="\n").writerow(["=a", 1, None, "@b"])
    assert out.getvalue() == "'=a,1,,'@b\n"


def test_a_plain_checksum_line_is_what_sha256sum_writes() -> None:
    assert checksum_line("ab", "x/y.wav") == "ab  x/y.wav\n"


def test_a_name_with_a_backslash_is_escaped() -> None:
    assert checksum_line("ab", "a\\b") == "\\ab  a\\\\b\n"


@pytest.mark.parametrize("name", ["a\nb.wav", "a\x1fb.wav", "a\u2028b.wav", "a\u202eb.wav"])
def test_it_names_a_file_name_with_a_control_character(name: str) -> None:
    assert "U+" in file_name_problem(name)


def test_it_accepts_an_ordinary_file_name() -> None:
    assert file_name_problem("Rain on a roof (2) \u2013 café.wav") == ""
