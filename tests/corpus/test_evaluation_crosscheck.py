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

import pytest

from corpus import evaluation, evaluation_java
from corpus.evaluation_files import read_predictions, read_references
from tests.conftest import FIXTURES, SHARED_DATA
from tests.corpus import aac_metrics_scorer as aac

pytestmark = pytest.mark.shared_data

AGREEMENT = 1e-4  # the bar; the two agree to the last bit here (see RESULTS.md)
SLICE = 200  # AudioCaps test clips for the human bound
FAMILIES = ("bleu", "meteor", "rouge", "cider")
Captions = dict[str, list[str]]


@pytest.fixture(scope="module")
def audiocaps_slice() -> Captions:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (CI keeps ../shared beside the clone)")
    references = read_references(SHARED_DATA / "audiocaps" / "test.csv", fmt="audiocaps")
    return dict(list(references.items())[:SLICE])


@pytest.fixture(scope="module")
def nn_references() -> Captions:
    return read_references(FIXTURES / "evaluation" / "synthscenes_1nn_references.csv")


@pytest.fixture(scope="module")
def nn_predictions() -> dict[str, str]:
    return read_predictions(FIXTURES / "evaluation" / "synthscenes_1nn_predictions.csv")


@pytest.fixture(scope="module")
def scored(
    audiocaps_slice: Captions,
    nn_predictions: dict[str, str],
    nn_references: Captions,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[evaluation.HumanBound, evaluation.Evaluation, list[aac.JobScores]]]:
    """(Earmark's human bound, Earmark's 1NN evaluation, aac-metrics' scores of the bound's
    rounds and then of the 1NN captions)."""
    why = aac.unavailable()
    if why:
        pytest.skip(why)
    folder = tmp_path_factory.mktemp("crosscheck")
    kit = evaluation_java.toolkit(folder / "cache")
    jobs = [
        *aac.human_rounds(audiocaps_slice),
        aac.prediction_job(nn_predictions, nn_references),
    ]
    run = aac.AacMetricsRun(jobs, kit=kit, folder=folder / "aac")
    meteor = evaluation_java.MeteorProcess(kit=kit)
    try:
        bound = evaluation.human_upper_bound(
            references=audiocaps_slice, metrics=FAMILIES, kit=kit, meteor=meteor
        )
        nn = evaluation.evaluate(
            predictions=nn_predictions,
            references=nn_references,
            metrics=FAMILIES,
            kit=kit,
            meteor=meteor,
        )
        yield bound, nn, run.result()
    finally:
        meteor.close()
        run.process.kill()
        run.process.wait()


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


def test_it_gives_aac_metrics_human_bound_round_by_round(
    scored: tuple[evaluation.HumanBound, evaluation.Evaluation, list[aac.JobScores]],
) -> None:
    bound, _, theirs = scored
    rounds = [job["corpus"] for job in theirs[:-1]]
    assert len(bound.rounds) == len(rounds) == 5
    for i, (ours, other) in enumerate(zip(bound.rounds, rounds, strict=True)):
        assert differences(ours, other) == {}, f"round {i + 1}"


def test_it_gives_aac_metrics_human_bound(
    scored: tuple[evaluation.HumanBound, evaluation.Evaluation, list[aac.JobScores]],
) -> None:
    bound, _, theirs = scored
    assert (bound.clips, bound.skipped) == (SLICE, 0)
    assert differences(bound.scores, mean([job["corpus"] for job in theirs[:-1]])) == {}
    assert 0.5 < (bound.scores["CIDEr-D"] or 0.0) < 1.5  # people agree, not perfectly


def test_it_gives_aac_metrics_scores_of_1nn_captions(
    scored: tuple[evaluation.HumanBound, evaluation.Evaluation, list[aac.JobScores]],
) -> None:
    _, nn, theirs = scored
    assert nn.clips == 200
    assert differences(nn.scores, theirs[-1]["corpus"]) == {}


def test_it_gives_aac_metrics_per_clip_scores_of_1nn_captions(
    scored: tuple[evaluation.HumanBound, evaluation.Evaluation, list[aac.JobScores]],
    nn_references: Captions,
) -> None:
    _, nn, theirs = scored
    per_clip = theirs[-1]["per_clip"]
    worst = max(
        (abs(nn.per_clip[key][name] - per_clip[name][i]), key, name)
        for i, key in enumerate(nn_references)
        for name in aac.COMPARED
    )
    assert worst[0] <= AGREEMENT, worst
