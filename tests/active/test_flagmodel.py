"""The meaning model behind the flags (active/flagmodel.py), learned from the caption slices
in tests/fixtures/flags and checked on a slice of captions it never saw."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from active import flagmodel, scoring
from active.flagmodel import FlagModel, caption_check
from benchmarks.flags_real import LAZY
from tests.conftest import FIXTURES, FLAG_FIXTURES

ONTOLOGY = json.loads((FIXTURES / "audioset_ontology.json").read_text(encoding="utf-8"))
HELD_OUT = flagmodel.read_caption_csv(FLAG_FIXTURES / "clotho_validation_head.csv")
THRESHOLDS = scoring.FlagThresholds()


def _flagged(clip: list[str], model: FlagModel) -> list[bool]:
    cider = scoring.CiderD([clip])
    out = []
    for i, text in enumerate(clip):
        findings, _ = caption_check(
            text=text,
            others=clip[:i] + clip[i + 1 :],
            cider=cider,
            thresholds=THRESHOLDS,
            model=model,
        )
        out.append(bool(findings))
    return out


@pytest.fixture(scope="module")
def corrupted(model: FlagModel) -> tuple[dict[str, list[bool]], list[bool]]:
    """Every held-out clip with one caption corrupted (the kinds taking turns, as the
    benchmark does): {kind: flagged?} and the untouched captions' flagged?"""
    counts = Counter(w for c in HELD_OUT for t in c for w in scoring.tokens(t))
    sources = [w for w in flagmodel.source_names(ONTOLOGY) if counts[w] >= 2]
    bad, changed = flagmodel.corrupt_clips(
        HELD_OUT, share=1.0, rng=random.Random(1), lazy=LAZY, sources=sources
    )
    kinds: dict[str, list[bool]] = {}
    untouched: list[bool] = []
    for c, clip in enumerate(bad):
        for i, flagged in enumerate(_flagged(clip, model)):
            kind = changed.get((c, i))
            if kind is None:
                untouched.append(flagged)
            else:
                kinds.setdefault(kind, []).append(flagged)
    return kinds, untouched


@pytest.mark.parametrize("kind", flagmodel.CORRUPTIONS)
def test_each_corruption_kind_is_flagged_more_often_than_untouched_captions(
    corrupted: tuple[dict[str, list[bool]], list[bool]], kind: str
) -> None:
    kinds, untouched = corrupted
    assert len(kinds[kind]) >= 20
    # at least one caption of the kind is caught, and at three times the false-alarm rate
    assert sum(kinds[kind]) >= 1
    assert np.mean(kinds[kind]) > 3 * np.mean(untouched)


def test_off_topic_and_generic_captions_are_mostly_caught(
    corrupted: tuple[dict[str, list[bool]], list[bool]],
) -> None:
    kinds, untouched = corrupted
    assert np.mean(kinds["generic"]) >= 0.8
    assert np.mean(kinds["off-topic"]) >= 0.3
    assert np.mean(untouched) <= 0.03


def test_an_untouched_clip_of_five_real_paraphrases_is_not_flagged(model: FlagModel) -> None:
    clip = [
        "A dog barks repeatedly while cars pass by on a busy road.",
        "A canine yelps over and over as traffic drives past.",
        "Traffic goes by as a dog is barking loudly.",
        "Vehicles drive past while a dog keeps barking.",
        "A barking dog and the sound of cars passing on the street.",
    ]
    assert _flagged(clip, model) == [False] * 5


def test_a_flag_names_its_kind_and_probability_in_plain_words(model: FlagModel) -> None:
    clip = [
        "A dog barks repeatedly while cars pass by on a busy road.",
        "A canine yelps over and over as traffic drives past.",
        "Traffic goes by as a dog is barking loudly.",
        "Vehicles drive past while a dog keeps barking.",
        "A sound is heard.",
    ]
    findings, score = caption_check(
        text=clip[4], others=clip[:4], cider=scoring.CiderD([clip]), thresholds=THRESHOLDS,
        model=model,
    )  # fmt: skip
    assert score is not None
    (finding,) = findings
    assert finding.evidence["check"] == "meaning"
    assert finding.evidence["likely"] == "generic"
    probability = finding.evidence["probability"]
    assert finding.reason.startswith("Likely generic: ")
    assert "other four captions" in finding.reason
    assert finding.reason.endswith(f"; {round(100 * probability)} %")


def test_without_a_model_the_consensus_check_is_cider_d() -> None:
    clip = ["a dog barks", "a dog barks loudly", "a dog is barking", "rain falls on a roof"]
    findings, score = caption_check(
        text=clip[3], others=clip[:3], cider=scoring.CiderD([clip]), thresholds=THRESHOLDS,
        model=None,
    )  # fmt: skip
    assert score is None
    assert [f.kind for f in findings] == ["consensus"]
    assert "leave_one_out_cider_d" in findings[0].evidence


def test_a_source_and_what_it_makes_name_the_same_source(model: FlagModel) -> None:
    assert model.same_source("dog", "bark")
    assert model.same_source("car", "vehicle")
    assert not model.same_source("dog", "cat")


def test_the_word_vectors_put_sound_words_near_their_sources(model: FlagModel) -> None:
    def cos(a: str, b: str) -> float:
        return float(model.vectors[model.index[a]] @ model.vectors[model.index[b]])

    assert cos("dog", "bark") > cos("dog", "engine")
    assert cos("engine", "car") > cos("engine", "bird")


def test_the_model_round_trips_through_its_file(model: FlagModel, tmp_path: Path) -> None:
    path = tmp_path / "m.npz"
    model.save(path)
    again = FlagModel.load(path)
    assert again.words == model.words
    assert again.detector == model.detector
    assert again.sources == model.sources
    assert np.allclose(again.vectors, model.vectors, atol=1e-3)  # stored as float16


def test_a_model_of_another_version_is_refused(
    model: FlagModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.npz"
    model.save(path)
    monkeypatch.setattr(flagmodel, "VERSION", flagmodel.VERSION + 1)
    with pytest.raises(ValueError, match="rebuild it"):
        FlagModel.load(path)


def test_a_wrong_source_corruption_swaps_the_first_source_noun() -> None:
    bad = flagmodel.corrupt(
        "wrong-source", "Dogs bark while a car passes.", rng=random.Random(0), pool=[],
        lazy=[], sources=["car", "dog", "siren"],
    )  # fmt: skip
    assert bad in ("Cars bark while a car passes.", "Sirens bark while a car passes.")


def test_a_caption_without_a_source_noun_cannot_be_given_a_wrong_source() -> None:
    assert (
        flagmodel.corrupt(
            "wrong-source",
            "Something hums.",
            rng=random.Random(0),
            pool=[],
            lazy=[],
            sources=["car", "dog"],
        )
        is None
    )


def test_too_few_captions_to_learn_from_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 100 distinct captions"):
        flagmodel.flag_model_learn(captions=[["a dog barks"]] * 5, ontology=ONTOLOGY)


def test_a_caption_file_of_another_format_is_named(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("id,text\n1,a dog barks\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"x\.csv: not a Clotho"):
        flagmodel.read_caption_csv(path)


def test_a_wrong_source_reason_names_the_word_and_what_it_does_not_fit() -> None:
    notes = {"misfit_source": "car", "misfit_with": "bark", "missing_source": "dog"}
    assert flagmodel.reason_words("wrong-source", notes, 4) == (
        "Likely wrong source: 'car' does not fit 'bark' nor the other four captions (they say dog)"
    )


def test_an_unseen_plural_of_a_word_form_it_read_gets_that_forms_lemma() -> None:
    """A plural -s on a gerund or on a word ending in s ("rustlings", "glasss") is a form
    spaCy never read at build time: the light lemmatiser left it an unknown word without a
    vector or a source, so a caption saying it named nothing the others could contradict."""
    model = FlagModel(
        words=["glass", "rustle", "whistle"],
        vectors=np.eye(3, flagmodel.DIM, dtype=np.float32),
        idf=np.ones(3, dtype=np.float32),
        lemmas={"rustling": "rustle", "glass": "glass", "whistling": "whistle", "news": "news"},
        stop=frozenset({"a", "the"}),
        sources={"glass": ["/m/glass"], "whistle": ["/m/whistle"]},
        broader={},
        captions=100,
    )
    assert model.lemma("rustlings") == "rustle"
    assert model.lemma("glasss") == "glass"
    assert model.lemma("news") == "news"  # a form it read keeps its own lemma
    assert model.lemma("barks") == "bark"  # no form it read: the light lemmatiser
    caption = model.caption("Whistlings chirp as the glasss clink.")
    assert caption.sources == ["whistle", "glass"]
    assert caption.ids == [2, 0]
