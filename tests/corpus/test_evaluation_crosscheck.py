"""corpus.evaluation against aac-metrics, an independent implementation of the same metrics
(tests/corpus/aac_metrics_scorer.py says how it runs here): BLEU-1..4, METEOR, ROUGE-L and
CIDEr-D agree within AGREEMENT on the human bound of 200 AudioCaps test clips (per round and
the mean) and on 1NN retrieval captions of 200 SynthScenes test scenes (corpus and per clip).
benchmarks/metrics_crosscheck.py does the same on the whole AudioCaps test split.

aac-metrics computes every job in one child process, started before Earmark's scores so both
run at once (each of its METEOR scorings starts a JVM of its own).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

from corpus import evaluation, evaluation_java
from corpus.evaluation_files import read_predictions, read_references
from tests.conftest import FIXTURES, SHARED_DATA
from tests.corpus import aac_metrics_scorer as aac

AGREEMENT = 1e-4  # the bar; the two agree to the last bit here (see RESULTS.md)
SLICE = 200  # AudioCaps test clips for the human bound
FAMILIES = ("bleu", "meteor", "rouge", "cider")
Captions = dict[str, list[str]]


@dataclass
class Crosscheck:
    """Earmark's scores and aac-metrics' of the same captions."""

    bound: evaluation.HumanBound | None  # None without ../shared
    bound_rounds: list[aac.JobScores]
    nn: evaluation.Evaluation
    nn_theirs: aac.JobScores


def audiocaps_slice() -> Captions | None:
    if not SHARED_DATA.is_dir():
        return None
    references = read_references(SHARED_DATA / "audiocaps" / "test.csv", fmt="audiocaps")
    return dict(list(references.items())[:SLICE])


@pytest.fixture(scope="module")
def nn_references() -> Captions:
    return read_references(FIXTURES / "evaluation" / "synthscenes_1nn_references.csv")


@pytest.fixture(scope="module")
def scored(
    nn_references: Captions, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Crosscheck]:
    why = aac.unavailable()
    if why:
        pytest.skip(why)
    nn_predictions = read_predictions(FIXTURES / "evaluation" / "synthscenes_1nn_predictions.csv")
    references = audiocaps_slice()
    rounds = aac.human_rounds(references) if references else []
    folder = tmp_path_factory.mktemp("crosscheck")
    kit = evaluation_java.toolkit(folder / "cache")
    jobs = [*rounds, aac.prediction_job(nn_predictions, nn_references)]
    run = aac.AacMetricsRun(jobs, kit=kit, folder=folder / "aac")
    meteor = evaluation_java.MeteorProcess(kit=kit)
    try:
        bound = None
        if references:
            bound = evaluation.human_upper_bound(
                references=references, metrics=FAMILIES, kit=kit, meteor=meteor
            )
        nn = evaluation.evaluate(
            predictions=nn_predictions,
            references=nn_references,
            metrics=FAMILIES,
            kit=kit,
            meteor=meteor,
        )
        theirs = run.result()
        yield Crosscheck(bound=bound, bound_rounds=theirs[:-1], nn=nn, nn_theirs=theirs[-1])
    finally:
        meteor.close()
        run.process.kill()
        run.process.wait()


def human_bound(scored: Crosscheck) -> evaluation.HumanBound:
    if scored.bound is None:
        pytest.skip(f"shared data not found at {SHARED_DATA} (CI keeps ../shared beside the clone)")
    return scored.bound


def differences(
    ours: dict[str, float | None], theirs: dict[str, float]
) -> dict[str, tuple[float | None, float]]:
    """The metrics on which the two disagree by more than AGREEMENT, with both values."""
    return {
        name: (ours[name], theirs[name])
        for name in aac.COMPARED
        if ours[name] is None or abs(float(ours[name] or 0.0) - theirs[name]) > AGREEMENT
    }


def mean(rounds: Sequence[dict[str, float]]) -> dict[str, float]:
    return {name: sum(r[name] for r in rounds) / len(rounds) for name in aac.COMPARED}


@pytest.mark.shared_data
def test_it_gives_aac_metrics_human_bound_round_by_round(scored: Crosscheck) -> None:
    bound = human_bound(scored)
    rounds = [job["corpus"] for job in scored.bound_rounds]
    assert len(bound.rounds) == len(rounds) == 5
    for i, (ours, theirs) in enumerate(zip(bound.rounds, rounds, strict=True)):
        assert differences(ours, theirs) == {}, f"round {i + 1}"


@pytest.mark.shared_data
def test_it_gives_aac_metrics_human_bound(scored: Crosscheck) -> None:
    bound = human_bound(scored)
    assert (bound.clips, bound.skipped) == (SLICE, 0)
    assert differences(bound.scores, mean([job["corpus"] for job in scored.bound_rounds])) == {}
    assert 0.5 < (bound.scores["CIDEr-D"] or 0.0) < 1.5  # people agree, not perfectly


def test_it_gives_aac_metrics_scores_of_1nn_captions(scored: Crosscheck) -> None:
    assert scored.nn.clips == 200
    assert differences(scored.nn.scores, scored.nn_theirs["corpus"]) == {}


def test_it_gives_aac_metrics_per_clip_scores_of_1nn_captions(
    scored: Crosscheck, nn_references: Captions
) -> None:
    theirs = scored.nn_theirs["per_clip"]
    worst = max(
        (abs(scored.nn.per_clip[key][name] - theirs[name][i]), key, name)
        for i, key in enumerate(nn_references)
        for name in aac.COMPARED
    )
    assert worst[0] <= AGREEMENT, worst
