"""The one text gate (annotation.rules.gate): the caption rules on the text as typed and on
its normal form (NFKC, as post-processing stores it), at every way a caption comes in; and,
over arbitrary Unicode, that no caption it accepts is stored, processed or exported as a
formula or with a control character."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation import rules
from annotation.models import Batch, Caption
from annotation.services import assignment_submit, hit_claim
from core.text import normalise, spreadsheet_cell, starts_formula
from postprocessing.numbers import numbers_to_words
from postprocessing.text import drop_final_period
from tests.annotation.factories import captions_for, listened

INERT = re.compile(r"[A-Za-z0-9_.-]*", re.ASCII)
LIMITS = rules.Limits(min_words=1, max_words=80, max_chars=500)
# spaces NFKC folds to " " and invisible characters normalise drops, each before "="
UNICODE_SPACED = ["\u2002", "\u2000", "\u200a", "\u202f", "\u205f", "\u200b", "\ufeff", "\u00ad"]


@pytest.mark.parametrize("space", UNICODE_SPACED)
def test_it_refuses_a_formula_behind_a_space_that_normalising_removes(space: str) -> None:
    text = f"{space}=1+1 a dog barks loudly"
    assert rules.errors(text, LIMITS) == []  # the table alone, as the HIT page runs it
    assert [p.code for p in rules.gate(text, LIMITS)] == ["formula"]


def test_it_refuses_a_full_width_name_that_normalises_to_one() -> None:
    text = "a man talks to \uff2aohn loudly"  # a full-width J
    assert "proper_name" in {p.code for p in rules.gate(text, LIMITS)}


def test_it_reports_a_problem_of_both_forms_once() -> None:
    assert [p.code for p in rules.gate("=1+1 dog barks loudly", LIMITS)] == ["formula"]


def test_it_applies_only_the_safety_rules_without_limits() -> None:
    assert rules.gate("There is a dog") == []  # style rules bind typed captions only
    codes = {p.code for p in rules.gate("\u2002@SUM(A1) <b>dog</b>")}
    assert codes == {"formula", "markup"}


def test_it_refuses_a_tab_inside_a_caption() -> None:
    assert [p.code for p in rules.gate("a dog\tbarks loudly", LIMITS)] == ["control"]


@pytest.mark.django_db
def test_it_refuses_at_submit_a_formula_behind_an_en_space(batch: Batch, ann: Any) -> None:
    assignment = listened(hit_claim(worker=ann))  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as refused:
        assignment_submit(
            assignment=assignment,
            worker=ann,
            captions=captions_for(assignment, "\u2002=1+1 a dog barks loudly"),
        )
    assert "a spreadsheet opening the exported captions would run as a formula" in str(
        refused.value
    )
    assert not Caption.objects.exists()


# Properties over arbitrary Unicode --------------------------------------------------------


def _processed(text: str) -> str:
    """The processed form up to the grammar step (which needs a LanguageTool server)."""
    return numbers_to_words(drop_final_period(normalise(text)))


def _has_control(text: str) -> bool:
    return any(unicodedata.category(char) == "Cc" for char in text)


captions = st.one_of(
    st.text(max_size=60),
    # the shapes that matter, so the property meets them often: spaces, formula starts
    st.builds(
        lambda head, start, rest: head + start + rest,
        st.text(alphabet=st.sampled_from([" ", "\t", *UNICODE_SPACED, "\u3000"]), max_size=3),
        st.sampled_from(["=", "+", "-", "@", "\uff1d", "\ufe62", "\u207a", "a", "1"]),
        st.text(max_size=30),
    ),
)


@settings(max_examples=400, deadline=None)
@given(captions)
def test_no_accepted_caption_stores_processes_or_exports_as_a_formula(text: str) -> None:
    stored = rules.trim(text)
    if not stored or rules.gate(stored, LIMITS):
        return
    for form in (stored, normalise(stored), _processed(stored)):
        assert not starts_formula(form), (text, form)
        assert not _has_control(form), (text, form)
        assert not starts_formula(spreadsheet_cell(form))


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=40))
def test_no_exported_cell_starts_a_formula(value: str) -> None:
    cell = spreadsheet_cell(value)
    # only an inert cell (a YouTube id, a negative number) keeps a leading "-"
    assert not starts_formula(cell) or (cell == value and INERT.fullmatch(value))
