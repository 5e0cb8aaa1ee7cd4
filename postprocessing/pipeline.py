"""The caption post-processing pipeline: ordered steps, each one recorded.

    normalise → drop_final_period → numbers_to_words → grammar → tokenise → train_text

The text after ``grammar`` is the caption's final text; ``tokenise`` gives its spaCy tokens
and ``train_text`` its lower-case, punctuation-free training form. Every step leaves a
record ``{name, before, after, status, reason}`` (status applied, unchanged or skipped);
the grammar step adds the LanguageTool matches it applied and those it ignored.

Grammar correction needs a LanguageTool server and is the slow step, so it runs on the
whole batch at once (``Grammar.correct_many``, one request per few hundred captions);
without one it is recorded as skipped with the reason, and nothing pretends it ran.

Bump PIPELINE_VERSION whenever a step changes what it writes: processed captions of an
older version are processed again by ``postprocess_captions``. No Django here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Protocol

from postprocessing import nlp
from postprocessing.languagetool import Correction, LanguageToolUnavailable
from postprocessing.numbers import numbers_to_words
from postprocessing.text import drop_final_period, normalise, train_text

PIPELINE_VERSION = "1"
STEPS: dict[str, str] = {
    "normalise": "Whitespace and Unicode normalisation",
    "drop_final_period": "Final period dropped",
    "numbers_to_words": "Numbers to words (num2words)",
    "grammar": "Grammar correction (LanguageTool)",
    "tokenise": "Tokens (spaCy English tokenizer)",
    "train_text": "Training text (lower-case, no punctuation)",
}
APPLIED, UNCHANGED, SKIPPED = "applied", "unchanged", "skipped"
REVERTED_REASON = "reverted by a reviewer"


class Grammar(Protocol):
    def correct_many(self, texts: Sequence[str]) -> list[Correction]: ...


@dataclass
class Processed:
    final_text: str
    train_text: str
    tokens: list[str]
    steps: list[dict[str, Any]]

    @property
    def grammar(self) -> dict[str, Any]:
        return next(step for step in self.steps if step["name"] == "grammar")


def pipeline_version() -> str:
    """The pipeline's version and the versions of the tools that shape its output."""
    return f"{PIPELINE_VERSION}; num2words {version('num2words')}; spaCy {version('spacy')}"


def _step(name: str, before: str, after: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "before": before,
        "after": after,
        "status": APPLIED if after != before else UNCHANGED,
        "reason": "",
        **extra,
    }


def _skipped(name: str, text: str, reason: str) -> dict[str, Any]:
    return {
        "name": name,
        "before": text,
        "after": text,
        "status": SKIPPED,
        "reason": reason,
        "matches": [],
        "ignored": [],
    }


def process_many(
    texts: Sequence[str],
    *,
    grammar: Grammar | None,
    grammar_unavailable: str = "",
    grammar_off: Sequence[bool] = (),
) -> list[Processed]:
    """Runs every text through the pipeline. `grammar` is None when no LanguageTool is
    reachable (`grammar_unavailable` says why); `grammar_off[i]` skips grammar for text i
    (a reviewer reverted it)."""
    early: list[list[dict[str, Any]]] = []
    for raw in texts:
        normalised = normalise(raw)
        no_period = drop_final_period(normalised)
        worded = numbers_to_words(no_period)
        early.append(
            [
                _step("normalise", raw, normalised),
                _step("drop_final_period", normalised, no_period),
                _step("numbers_to_words", no_period, worded),
            ]
        )
    before = [steps[-1]["after"] for steps in early]
    off = list(grammar_off) or [False] * len(texts)
    grammar_steps = _grammar_steps(before, grammar, grammar_unavailable, off)
    finals = [step["after"] for step in grammar_steps]
    tokens = nlp.tokenize_many(finals)
    return [
        Processed(final, train, toks, [*steps, grammar_step, *finish])
        for steps, grammar_step, final, toks in zip(
            early, grammar_steps, finals, tokens, strict=True
        )
        for train, finish in [_finish(final, toks)]
    ]


def _grammar_steps(
    texts: list[str], grammar: Grammar | None, unavailable: str, off: list[bool]
) -> list[dict[str, Any]]:
    steps: list[dict[str, Any] | None] = [
        _skipped("grammar", text, REVERTED_REASON) if skip else None
        for text, skip in zip(texts, off, strict=True)
    ]
    wanted = [i for i, step in enumerate(steps) if step is None]
    if wanted and grammar is not None:
        try:
            corrections = grammar.correct_many([texts[i] for i in wanted])
        except LanguageToolUnavailable as exc:
            unavailable, grammar = str(exc), None
        else:
            for i, correction in zip(wanted, corrections, strict=True):
                steps[i] = _step(
                    "grammar",
                    texts[i],
                    correction.text,
                    matches=correction.applied,
                    ignored=correction.ignored,
                )
    if grammar is None:
        for i in wanted:
            steps[i] = _skipped("grammar", texts[i], unavailable or "no LanguageTool configured")
    return [step for step in steps if step is not None]


def _finish(final: str, tokens: list[str]) -> tuple[str, list[dict[str, Any]]]:
    train = train_text(final)
    return train, [
        {**_step("tokenise", final, " ".join(tokens)), "status": APPLIED},
        _step("train_text", final, train),
    ]


def refinish(final: str) -> tuple[list[str], str, list[dict[str, Any]]]:
    """Tokens, training text and the last two step records for a new final text (after
    a reviewer reverts the grammar correction)."""
    tokens = nlp.tokenize(final)
    train, steps = _finish(final, tokens)
    return tokens, train, steps
