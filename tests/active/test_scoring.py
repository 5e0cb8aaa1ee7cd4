"""active/scoring.py on hand-made inputs: CIDEr-D against pycocoevalcap, each ranking
strategy's order, edit distances, word-hint matching and the flag checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pycocoevalcap.cider.cider import Cider

from active import scoring
from active.scoring import CiderD, ClipEvidence, FlagThresholds, caption_findings, rank

GTS = {
    "a": ["A dog barks loudly.", "a dog is barking twice", "Dogs bark in the distance"],
    "b": ["Rain falls on a roof", "heavy rain falls while thunder rumbles"],
    "c": ["A man speaks, then a woman speaks", "a man talks"],
    "d": ["a siren wails as cars pass by", "an emergency siren blares"],
}
RES = {"a": "a dog barks", "b": "rain falls and thunder rumbles", "c": "a woman speaks",
       "d": "a siren wails"}  # fmt: skip


def test_it_gives_pycocoevalcaps_cider_d_per_clip() -> None:
    gts = {k: [" ".join(scoring.tokens(t)) for t in v] for k, v in GTS.items()}
    res = {k: [" ".join(scoring.tokens(v))] for k, v in RES.items()}
    mean, per_clip = Cider().compute_score(gts, res)
    cider = CiderD(GTS.values())
    mine = [cider.score(RES[k], GTS[k]) for k in GTS]
    assert mine == pytest.approx(list(per_clip), abs=1e-9)
    assert sum(mine) / len(mine) == pytest.approx(mean, abs=1e-9)


def test_it_tokenizes_like_the_ptb_tokenizer_for_plain_captions() -> None:
    assert scoring.tokens("A dog's bark, then (quiet) rain...") == [
        "a", "dog's", "bark", "then", "quiet", "rain",
    ]  # fmt: skip


def test_it_refuses_an_empty_corpus() -> None:
    with pytest.raises(ValueError, match="at least one clip"):
        CiderD([])


def test_leave_one_out_singles_out_the_odd_caption() -> None:
    captions = ["a dog barks loudly", "a dog barks twice", "a dog is barking", "rain on a roof"]
    values = scoring.leave_one_out(captions, CiderD([*GTS.values(), captions]))
    assert values.index(min(values)) == 3


def _keys(ranked: list[scoring.Ranked]) -> list[int | str]:
    return [r.key for r in ranked]


def test_uncertainty_puts_the_highest_entropy_first_and_unheard_clips_before_all() -> None:
    clips = [
        ClipEvidence(1, 0.4),
        ClipEvidence(2, 2.5),
        ClipEvidence(3, None),
        ClipEvidence(4, 1.0),
    ]
    ranked = rank("uncertainty", clips)
    assert _keys(ranked) == [3, 2, 4, 1]
    assert [r.priority for r in ranked] == [1.0, 0.75, 0.5, 0.25]


def test_margin_puts_the_smallest_beam_margin_first() -> None:
    def beam(*scores: float) -> list[Mapping[str, Any]]:
        return [{"text": f"t{i}", "score": s, "log_prob": s * 4} for i, s in enumerate(scores)]

    clips = [
        ClipEvidence(1, hypotheses=beam(-0.1, -0.9)),  # margin 0.8: sure
        ClipEvidence(2, hypotheses=beam(-0.5, -0.52)),  # margin 0.02: torn
        ClipEvidence(3, hypotheses=beam(-0.3, -0.5)),  # margin 0.2
    ]
    ranked = rank("margin", clips)
    assert _keys(ranked) == [2, 3, 1]
    assert ranked[0].details["beam_margin"] == pytest.approx(0.02)


def test_committee_puts_the_most_disagreeing_beam_first() -> None:
    agree = ["a dog barks loudly", "a dog barks", "a dog barks twice"]
    split = ["a dog barks loudly", "rain falls on a roof", "a man speaks"]
    clips = [
        ClipEvidence(1, hypotheses=[{"text": t, "score": -0.1} for t in agree]),
        ClipEvidence(2, hypotheses=[{"text": t, "score": -0.1} for t in split]),
    ]
    cider = CiderD([agree, split, *GTS.values()])
    ranked = rank("committee", clips, cider=cider)
    assert _keys(ranked) == [2, 1]
    most, least = ranked[0].score, ranked[1].score
    assert most is not None
    assert least is not None
    assert most > least
    assert 0 <= least <= most <= 1


def test_committee_prefers_other_models_over_the_beam() -> None:
    clip = ClipEvidence(1, hypotheses=[{"text": "a dog barks"}, {"text": "rain falls"}],
                        committee=["a dog barks loudly"])  # fmt: skip
    assert scoring.committee_of(clip) == ["a dog barks", "a dog barks loudly"]


def test_diversity_picks_uncovered_labels_first_then_spreads_them() -> None:
    clips = [
        ClipEvidence(1, labels=["dog"]),
        ClipEvidence(2, labels=["dog", "rain"]),
        ClipEvidence(3, labels=["siren"]),
        ClipEvidence(4, labels=["rain"]),
    ]
    # dog is covered 3 times already: rain+dog (1 + 1/4), siren (1), rain (now 1/2), dog (1/5)
    ranked = rank("diversity", clips, covered={"dog": 3})
    assert _keys(ranked) == [2, 3, 4, 1]
    assert [r.score for r in ranked] == pytest.approx([1.25, 1.0, 0.5, 0.2])


def test_hybrid_weighs_uncertainty_by_label_coverage() -> None:
    clips = [
        ClipEvidence(1, mean_entropy=2.0, labels=["dog"]),
        ClipEvidence(2, mean_entropy=1.9, labels=["dog"]),
        ClipEvidence(3, mean_entropy=1.0, labels=["siren"]),
        ClipEvidence(4, mean_entropy=0.5, labels=["rain"]),
        ClipEvidence(5, mean_entropy=None, labels=["dog"]),
    ]
    # uncertainty alone takes 1 then 2 (both dog); hybrid: 1 (2.0 x 1), then dog is worth
    # 1/2 so 3 (1.0 x 1) beats 2 (1.9 x 1/2 = 0.95); then 2 (0.95), 4 (0.5). The clip the
    # model never captioned still comes first.
    assert _keys(rank("uncertainty", clips)) == [5, 1, 2, 3, 4]
    ranked = rank("hybrid", clips)
    assert _keys(ranked) == [5, 1, 3, 2, 4]
    assert [r.score for r in ranked] == pytest.approx([None, 2.0, 1.0, 0.95, 0.5])
    assert [r.priority for r in ranked] == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2])


def test_hybrid_counts_labels_already_captioned() -> None:
    clips = [
        ClipEvidence("a", mean_entropy=3.0, labels=["dog"]),
        ClipEvidence("b", mean_entropy=1.0, labels=["rain", "siren"]),
        ClipEvidence("c", mean_entropy=1.0, labels=[]),
    ]
    # dog captioned 5 times: a = 3.0 / 6 = 0.5; b = 1.0 x 2 = 2.0; c (no labels) = 1.0
    ranked = rank("hybrid", clips, covered={"dog": 5})
    assert _keys(ranked) == ["b", "c", "a"]
    assert [r.score for r in ranked] == pytest.approx([2.0, 1.0, 0.5])


def test_hybrid_with_equal_coverage_is_uncertainty_order_and_ties_go_to_smaller_key() -> None:
    clips = [ClipEvidence(k, mean_entropy=e, labels=[f"l{k}"])
             for k, e in [(3, 0.7), (1, 0.2), (2, 0.7), (4, 0.9)]]  # fmt: skip
    assert _keys(rank("hybrid", clips)) == [4, 2, 3, 1]
    assert _keys(rank("hybrid", clips)) == _keys(rank("uncertainty", clips))


def test_random_is_a_seeded_permutation() -> None:
    clips = [ClipEvidence(i) for i in range(20)]
    first = _keys(rank("random", clips, seed=7))
    assert first == _keys(rank("random", clips, seed=7))
    assert first != _keys(rank("random", clips, seed=8))
    assert sorted(first) == list(range(20))


def test_it_refuses_an_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="Unknown strategy 'loudest'"):
        rank("loudest", [])


def test_edit_distance_counts_characters_or_words() -> None:
    assert scoring.edit_distance("a dog barks", "a dog barks") == 0
    assert scoring.edit_distance("kitten", "sitting") == 3
    words = scoring.tokens
    assert scoring.edit_distance(words("a dog barks"), words("a small dog barks loudly")) == 2


@pytest.mark.parametrize(
    ("caption", "hints", "matched"),
    [
        ("A puppy yaps twice", ["dog", "Bark"], ["bark", "dog"]),  # synonyms
        ("Dogs barking in the distance", ["dog"], ["dog"]),  # lemmas
        ("Men are talking", ["Male speech, man speaking"], ["male", "man", "speaking", "speech"]),
        ("Rain falls on a roof", ["dog", "Bark"], []),
    ],
)
def test_hint_mention_uses_lemmas_and_synonyms(
    caption: str, hints: list[str], matched: list[str]
) -> None:
    assert scoring.hint_mention(caption, hints) == matched


CIDER = CiderD([*GTS.values(), ["a dog barks", "a dog barks loudly", "a dog is barking"]])


def test_a_caption_far_from_a_confident_suggestion_is_flagged() -> None:
    found = caption_findings(text="rain falls on a roof", suggestion="a dog barks loudly",
                             suggestion_entropy=0.3, cider=CIDER)  # fmt: skip
    assert [f.kind for f in found] == ["model"]
    assert found[0].evidence["suggestion"] == "a dog barks loudly"
    assert found[0].evidence["cider_d"] < FlagThresholds().model_min_cider


def test_an_unsure_suggestion_flags_nothing() -> None:
    found = caption_findings(text="rain falls on a roof", suggestion="a dog barks loudly",
                             suggestion_entropy=3.0, cider=CIDER)  # fmt: skip
    assert found == []


def test_a_caption_against_the_clips_others_is_flagged() -> None:
    others = ["a dog barks", "a dog barks loudly", "a dog is barking"]
    found = caption_findings(text="a siren wails", others=others, cider=CIDER)
    assert [f.kind for f in found] == ["consensus"]
    assert found[0].evidence["other_captions"] == 3


def test_a_caption_naming_no_hint_is_flagged() -> None:
    found = caption_findings(text="rain falls on a roof", hints=["dog", "Bark"], cider=CIDER)
    assert [f.kind for f in found] == ["hints"]
    assert found[0].evidence["hints"] == ["bark", "dog"]


def test_a_clean_caption_is_not_flagged() -> None:
    others = ["a dog barks", "a dog barks loudly", "a dog is barking"]
    found = caption_findings(
        text="a dog barks twice", others=others, suggestion="a dog barks loudly",
        suggestion_entropy=0.3, hints=["dog", "Bark"], cider=CIDER,
    )  # fmt: skip
    assert found == []


def test_the_model_check_defers_to_enough_agreeing_captions() -> None:
    # three people agree on rain; a sure but wrong suggestion does not outvote them
    others = ["rain falls on a roof", "rain pours down on a roof", "rain falls steadily"]
    found = caption_findings(text="rain falls on a tin roof", others=others,
                             suggestion="a dog barks loudly", suggestion_entropy=0.3,
                             cider=CIDER)  # fmt: skip
    assert found == []
    alone = FlagThresholds(model_defers_to_consensus=False)
    found = caption_findings(text="rain falls on a tin roof", others=others,
                             suggestion="a dog barks loudly", suggestion_entropy=0.3,
                             cider=CIDER, thresholds=alone)  # fmt: skip
    assert [f.kind for f in found] == ["model"]


def test_the_model_check_speaks_while_consensus_cannot() -> None:
    # one other caption is too few for consensus: the suggestion is the only cross-check
    found = caption_findings(text="rain falls on a roof", others=["a dog barks"],
                             suggestion="a dog barks loudly", suggestion_entropy=0.3,
                             cider=CIDER)  # fmt: skip
    assert [f.kind for f in found] == ["model"]


def test_consensus_waits_for_enough_captions() -> None:
    found = caption_findings(text="a siren wails", others=["a dog barks"], cider=CIDER)
    assert found == []


def test_precision_and_recall() -> None:
    assert scoring.precision_recall({1, 2, 3, 4}, {1, 2, 5}) == (0.5, pytest.approx(2 / 3))
    assert scoring.precision_recall(set(), {1}) == (None, 0.0)
