"""Every step of the pipeline, in order, each recorded; the grammar skip path."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from postprocessing.languagetool import (
    Config,
    Correction,
    LanguageToolClient,
    LanguageToolUnavailable,
)
from postprocessing.pipeline import STEPS, pipeline_version, process_many, refinish
from tests.postprocessing.lt_server import FakeLanguageTool

RAW = "  A  owl hoots 3 times\u200b, then a dgo barks.  "


def _client(server: FakeLanguageTool) -> LanguageToolClient:
    return LanguageToolClient(Config(url=server.url))


def test_it_runs_every_step_in_order(lt_server: FakeLanguageTool) -> None:
    [result] = process_many([RAW], grammar=_client(lt_server))
    assert [s["name"] for s in result.steps] == list(STEPS)
    assert [(s["after"], s["status"]) for s in result.steps] == [
        ("A owl hoots 3 times, then a dgo barks.", "applied"),
        ("A owl hoots 3 times, then a dgo barks", "applied"),
        ("A owl hoots three times, then a dgo barks", "applied"),
        ("An owl hoots three times, then a dog barks", "applied"),
        ("An owl hoots three times , then a dog barks", "applied"),
        ("an owl hoots three times then a dog barks", "applied"),
    ]
    assert result.steps[0]["before"] == RAW
    for previous, step in zip(result.steps[:4], result.steps[1:5], strict=True):
        assert step["before"] == previous["after"]  # each step starts where the last ended
    assert result.steps[5]["before"] == result.final_text
    assert result.final_text == "An owl hoots three times, then a dog barks"
    assert result.train_text == "an owl hoots three times then a dog barks"
    assert result.tokens == [
        "An",
        "owl",
        "hoots",
        "three",
        "times",
        ",",
        "then",
        "a",
        "dog",
        "barks",
    ]


def test_it_records_what_languagetool_applied(lt_server: FakeLanguageTool) -> None:
    [result] = process_many([RAW], grammar=_client(lt_server))
    matches = result.grammar["matches"]
    assert [(m["rule"], m["original"], m["replacement"]) for m in matches] == [
        ("EN_A_VS_AN", "A", "An"),
        ("MORFOLOGIK_RULE_EN_US", "dgo", "dog"),
    ]


def test_a_step_that_changes_nothing_is_unchanged(lt_server: FakeLanguageTool) -> None:
    [result] = process_many(["A dog barks"], grammar=_client(lt_server))
    statuses = {s["name"]: s["status"] for s in result.steps}
    assert statuses == {
        "normalise": "unchanged",
        "drop_final_period": "unchanged",
        "numbers_to_words": "unchanged",
        "grammar": "unchanged",
        "tokenise": "applied",
        "train_text": "applied",
    }


def test_without_languagetool_grammar_is_skipped_with_the_reason() -> None:
    [result] = process_many([RAW], grammar=None, grammar_unavailable="no server configured")
    grammar = result.grammar
    assert (grammar["status"], grammar["reason"]) == ("skipped", "no server configured")
    assert grammar["after"] == grammar["before"] == "A owl hoots three times, then a dgo barks"
    assert result.final_text == "A owl hoots three times, then a dgo barks"


def test_a_failing_server_skips_grammar_for_the_batch(lt_server: FakeLanguageTool) -> None:
    lt_server.fail = 503
    results = process_many(["a owl", "a eagle"], grammar=_client(lt_server))
    assert [r.grammar["status"] for r in results] == ["skipped", "skipped"]
    assert "answered HTTP 503" in results[0].grammar["reason"]
    assert [r.final_text for r in results] == ["a owl", "a eagle"]


def test_grammar_stays_off_for_a_reverted_caption(lt_server: FakeLanguageTool) -> None:
    results = process_many(
        ["a owl", "a owl"], grammar=_client(lt_server), grammar_off=[True, False]
    )
    assert [r.final_text for r in results] == ["a owl", "an owl"]
    assert results[0].grammar["reason"] == "reverted by a reviewer"
    assert lt_server.requests[0]["text"] == "a owl"  # only the other caption was sent


class _Broken:
    def correct_many(self, texts: Sequence[str]) -> list[Correction]:
        raise LanguageToolUnavailable("LanguageTool at http://lt:8010 unreachable: refused")


def test_an_unreachable_checker_is_a_skip_not_an_error() -> None:
    [result] = process_many(["a owl"], grammar=_Broken())
    assert result.grammar["reason"] == "LanguageTool at http://lt:8010 unreachable: refused"


def test_refinish_gives_tokens_and_training_text() -> None:
    tokens, train, steps = refinish("A dog's bark!")
    assert tokens == ["A", "dog", "'s", "bark", "!"]
    assert train == "a dog's bark"
    assert [s["name"] for s in steps] == ["tokenise", "train_text"]


def test_the_version_names_the_tools() -> None:
    assert pipeline_version().startswith("1; num2words 0.5.14; spaCy ")


@pytest.mark.parametrize("raw", ["", "   ", "\u200b"])
def test_an_empty_caption_goes_through(raw: str) -> None:
    [result] = process_many([raw], grammar=None)
    assert (result.final_text, result.train_text, result.tokens) == ("", "", [])
