"""The caption rules (annotation/rules.py): the table, each rule, and the Python half of
"same rules on both sides" (tests/browser/test_annotator.py runs SAMPLES through the JS)."""

from __future__ import annotations

import json
import re
import time

import pytest

from annotation import rules
from annotation.rules import RULES, Limits
from tests.annotation.caption_samples import LIMITS, SAMPLES

# Syntax one of the two engines reads differently or not at all.
NOT_COMMON = [
    "(?P",  # Python named groups
    "(?<name>",  # JS named groups (lookbehinds "(?<=" and "(?<!" are fine in both)
    "(?i",  # inline flags
    "(?m",
    "(?s",
    "(?x",
    "(?#",  # Python comments
    "\\A",
    "\\Z",
    "\\z",
    "\\s",  # Unicode reach differs
    "\\S",
    "\\p{",
    "\\P{",
    "\\k<",
    "*+",  # possessive
    "++",
    "?+",
]
PLACEHOLDERS = {"found", "codepoint", "words", "chars", "min_words", "max_words", "max_chars"}


def _codes(text: str, limits: Limits = LIMITS) -> set[str]:
    return {problem.code for problem in rules.check(text, limits)}


# The table -----------------------------------------------------------------------------


@pytest.mark.parametrize("rule", [r for r in RULES if r.pattern], ids=lambda r: r.code)
def test_it_compiles_every_pattern_in_python(rule: rules.Rule) -> None:
    flags = re.ASCII | (re.IGNORECASE if rule.ignore_case else 0)
    compiled = re.compile(rule.pattern, flags)
    assert compiled.groups <= 1, "{found} is the first group or the whole match"


@pytest.mark.parametrize("rule", [r for r in RULES if r.pattern], ids=lambda r: r.code)
def test_it_writes_patterns_in_the_common_subset_of_python_and_js(rule: rules.Rule) -> None:
    for token in NOT_COMMON:
        assert token not in rule.pattern, f"{rule.code}: {token!r} is not common syntax"
    assert not re.search(r"\(\?<[A-Za-z]", rule.pattern), "named groups differ"


def test_it_gives_every_rule_a_unique_code() -> None:
    codes = [rule.code for rule in RULES]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_it_fills_every_placeholder_of_the_messages(rule: rules.Rule) -> None:
    assert set(re.findall(r"\{(\w+)\}", rule.message)) <= PLACEHOLDERS
    assert set(re.findall(r"\{(\w+)\}", rule.guidance)) <= {"min_words", "max_words"}


def test_it_pairs_pattern_checks_with_patterns() -> None:
    for rule in RULES:
        assert bool(rule.pattern) == (rule.check in ("found", "missing")), rule.code


def test_it_serves_the_table_as_json_with_the_same_messages() -> None:
    table = json.loads(json.dumps(rules.table(LIMITS)))
    assert [r["message"] for r in table["rules"]] == [r.message for r in RULES]
    assert [r["pattern"] for r in table["rules"]] == [r.pattern for r in RULES]
    assert table["limits"] == {"min_words": 3, "max_words": 12, "max_chars": 120}
    assert table["trim"] == rules.TRIM
    assert table["word_pattern"] == rules.WORD_PATTERN


# The rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "codes"), SAMPLES, ids=[repr(t[:30]) for t, _ in SAMPLES])
def test_it_finds_the_rules_each_sample_breaks(text: str, codes: set[str]) -> None:
    assert _codes(text) == codes


def test_it_words_messages_as_the_end_of_a_sentence() -> None:
    limits = Limits(min_words=3, max_words=40, max_chars=500)
    assert [p.message for p in rules.errors("dog barks", limits)] == [
        "has 2 words; write at least 3"
    ]
    assert [p.message for p in rules.errors("a dog\x1b barks loudly", limits)] == [
        "contains a control character (U+001B); please remove it"
    ]
    assert rules.errors("There is a dog", limits)[0].message == (
        "starts with “There is”; start with the sound itself, e.g. “a dog barks …”"
    )


def test_it_says_one_word_in_the_singular() -> None:
    assert rules.errors("dog", LIMITS)[0].message == "has 1 word; write at least 3"


def test_it_never_expands_placeholders_typed_by_the_worker() -> None:
    problems = rules.errors("a man talks to {Words} loudly", LIMITS)
    assert problems == []
    problems = rules.errors("a man talks to Bob{min_words} loudly", LIMITS)
    assert problems[0].message.startswith("mentions “Bob”")
    text = "a {max_chars} car honks " + "loudly " * 20
    assert "{max_chars}" not in rules.errors(text, LIMITS)[0].message


def test_it_only_warns_about_tense_and_detail() -> None:
    warnings = {r.code for r in RULES if r.level == "warning"}
    assert warnings == {"tense", "detail"}
    assert rules.errors("a dog barked at a car", LIMITS) == []


def test_it_refuses_lone_surrogates_as_control_characters() -> None:
    assert _codes("a dog \ud800 barks loudly") == {"control"}
    assert _codes("a dog \udc00 barks loudly") == {"control"}


def test_it_trims_only_ascii_whitespace() -> None:
    assert rules.trim(" \t a dog barks \r\n") == "a dog barks"
    assert rules.trim("a dog barks\x85") == "a dog barks\x85"


def test_it_counts_words_between_any_spaces() -> None:
    assert rules.word_count("  a\tdog\n\nbarks\u00a0loudly ") == 4


def test_it_checks_a_100_kb_text_for_length_only_and_quickly() -> None:
    text = "." * 102_400
    started = time.perf_counter()
    problems = rules.check(text, LIMITS)
    assert [p.code for p in problems] == ["max_chars"]
    assert problems[0].message == "is 102,400 characters long; the limit is 120"
    # a behaviour bound, not a benchmark: a quadratic pattern would take minutes here
    assert time.perf_counter() - started < 1


# Examples, guidance and notes ----------------------------------------------------------


def test_it_shows_good_examples_that_pass_every_rule() -> None:
    limits = Limits(min_words=3, max_words=40, max_chars=500)
    for text in rules.GOOD_EXAMPLES:
        assert rules.check(text, limits) == [], text


def test_it_shows_bad_examples_with_what_is_wrong() -> None:
    examples = rules.examples(Limits(min_words=3, max_words=40, max_chars=500))
    assert len(examples["bad"]) == len(rules.BAD_EXAMPLES)
    for bad in examples["bad"]:
        assert bad["problems"], bad["text"]


def test_it_states_the_word_limits_in_the_guidance() -> None:
    assert "Write one sentence of 5 to 20 words." in rules.guidance(Limits(5, 20, 500))


@pytest.mark.parametrize(
    ("note", "code"), [("fine", None), ("bad\x00", "control"), ("\u202egnorw", "bidi")]
)
def test_it_finds_unsafe_characters_in_free_text(note: str, code: str | None) -> None:
    problem = rules.unsafe_characters(note)
    assert (problem.code if problem else None) == code
