"""corpus.evaluation against pycocoevalcap called directly, on the evaluation fixtures.

Real Java throughout. One METEOR process of ours and one of pycocoevalcap's serve the whole
module (each JVM costs seconds to start).
"""

from __future__ import annotations

import csv
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

from corpus import evaluation, evaluation_java
from corpus.evaluation import EvaluationError
from corpus.evaluation_java import MeteorProcess, Toolkit
from tests.conftest import FIXTURES

EVAL = FIXTURES / "evaluation"
Captions = dict[str, list[str]]


def audiocaps(name: str) -> list[dict[str, str]]:
    with open(EVAL / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def references() -> Captions:
    out: Captions = {}
    for row in audiocaps("audiocaps_references.csv"):
        out.setdefault(f"{row['youtube_id']}_{row['start_time']}", []).append(row["caption"])
    return out


@pytest.fixture(scope="module")
def predictions() -> dict[str, str]:
    rows = audiocaps("audiocaps_predictions.csv")
    return {f"{row['youtube_id']}_{row['start_time']}": row["caption"] for row in rows}


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Toolkit:
    return evaluation_java.toolkit(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def meteor(kit: Toolkit) -> Iterator[MeteorProcess]:
    process = MeteorProcess(kit=kit)
    yield process
    process.close()


@pytest.fixture(scope="module")
def coco_meteor() -> Iterator[Meteor]:
    scorer = Meteor()
    yield scorer
    scorer.meteor_p.stdin.close()
    scorer.meteor_p.wait(timeout=30)


def direct(gts: Captions, res: Captions, coco_meteor: Meteor) -> dict[str, float]:
    """What pycocoevalcap's own classes give: COCOEvalCap.evaluate without its COCO objects."""
    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in gts.items()})
    res = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in res.items()})
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    return {
        "BLEU-1": bleu[0],
        "BLEU-2": bleu[1],
        "BLEU-3": bleu[2],
        "BLEU-4": bleu[3],
        "METEOR": coco_meteor.compute_score(gts, res)[0],
        "ROUGE-L": Rouge().compute_score(gts, res)[0],
        "CIDEr-D": Cider().compute_score(gts, res)[0],
    }


@pytest.fixture(scope="module")
def evaluated(
    predictions: dict[str, str], references: Captions, kit: Toolkit, meteor: MeteorProcess
) -> evaluation.Evaluation:
    return evaluation.evaluate(
        predictions=predictions, references=references, kit=kit, meteor=meteor
    )


def test_it_gives_the_numbers_of_pycocoevalcap_called_directly(
    evaluated: evaluation.Evaluation,
    predictions: dict[str, str],
    references: Captions,
    coco_meteor: Meteor,
) -> None:
    expected = direct(references, {k: [v] for k, v in predictions.items()}, coco_meteor)
    got = {name: evaluated.scores[name] for name in expected}
    assert got == expected
    assert 0 < expected["CIDEr-D"] < 10  # the fixture is neither empty nor perfect


def test_it_reports_every_metric_under_its_paper_name(evaluated: evaluation.Evaluation) -> None:
    assert list(evaluated.scores) == list(evaluation.METRICS)
    assert (evaluated.clips, evaluated.references) == (8, 40)


def test_it_gives_per_clip_scores_of_pycocoevalcap(
    evaluated: evaluation.Evaluation, predictions: dict[str, str], references: Captions
) -> None:
    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in references.items()})
    res = tokenizer.tokenize({k: [{"caption": predictions[k]}] for k in references})
    _, per_clip = Cider().compute_score(gts, res)
    assert [evaluated.per_clip[k]["CIDEr-D"] for k in references] == list(per_clip)


def test_it_reports_spice_and_spider_unavailable_never_zero(
    evaluated: evaluation.Evaluation, kit: Toolkit
) -> None:
    assert evaluated.scores["SPICE"] is None
    assert evaluated.scores["SPIDEr"] is None
    assert "stanford-corenlp-3.6.0.jar" in evaluated.unavailable["SPICE"]
    assert "spice/lib folder of the installed pycocoevalcap" in evaluated.unavailable["SPICE"]
    assert "SPICE is unavailable" in evaluated.unavailable["SPIDEr"]


def test_it_reports_a_spice_that_fails_as_unavailable(tmp_path: Path) -> None:
    source = tmp_path / "pycocoevalcap"
    subprocess.run(["cp", "-rs", str(evaluation_java.pycocoevalcap_dir()), str(source)], check=True)
    for name in evaluation_java.CORENLP_JARS:  # present but broken: SPICE starts and fails
        (source / "spice" / "lib" / name).write_bytes(b"")
    kit = evaluation_java.toolkit(tmp_path / "cache", source=source)
    result = evaluation.evaluate(
        predictions={"a": "a dog barks"},
        references={"a": ["a dog is barking", "dogs bark loudly"]},
        metrics=["cider", "spice"],
        kit=kit,
    )
    assert result.scores["SPICE"] is None
    assert result.unavailable["SPICE"].startswith("SPICE failed (exit 1)")
    assert result.scores["SPIDEr"] is None


def test_why_spice_is_missing_names_no_server_path(tmp_path: Path) -> None:
    source = tmp_path / "pycocoevalcap"
    subprocess.run(["cp", "-rs", str(evaluation_java.pycocoevalcap_dir()), str(source)], check=True)
    kit = evaluation_java.toolkit(tmp_path / "cache", source=source)

    why = kit.spice_missing()

    assert "into the spice/lib folder of the installed pycocoevalcap package" in why
    assert str(tmp_path) not in why


def test_it_finds_corenlp_jars_installed_after_it_started(tmp_path: Path) -> None:
    source = tmp_path / "pycocoevalcap"
    subprocess.run(["cp", "-rs", str(evaluation_java.pycocoevalcap_dir()), str(source)], check=True)
    kit = evaluation_java.toolkit(tmp_path / "cache", source=source)
    assert "not installed" in kit.spice_missing()
    for name in evaluation_java.CORENLP_JARS:
        (source / "spice" / "lib" / name).write_bytes(b"PK")
    assert kit.spice_missing() == ""
    assert (kit.spice_dir / "lib" / evaluation_java.CORENLP_JARS[0]).resolve().parent == (
        source / "spice" / "lib"
    )


def test_it_takes_spider_as_the_mean_of_cider_d_and_spice(
    kit: Toolkit, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SPICE cannot run here (no CoreNLP); stand in for its two numbers to check the mean
    monkeypatch.setattr(Toolkit, "spice_missing", lambda self: "")
    monkeypatch.setattr(
        evaluation, "spice_score", lambda gts, res, kit: (0.25, {"a": 0.5, "b": 0.0})
    )
    gts = {"a": ["a dog barks", "dogs bark"], "b": ["rain falls", "heavy rain"]}
    res = {"a": ["a dog barks"], "b": ["a car passes"]}
    out = evaluation.score_tokenized(gts, res, metrics=["cider", "spice"], kit=kit)
    cider = out.scores["CIDEr-D"]
    assert cider is not None
    assert out.scores["SPIDEr"] == (cider + 0.25) / 2
    assert out.per_clip["a"]["SPIDEr"] == (out.per_clip["a"]["CIDEr-D"] + 0.5) / 2


def test_it_gives_the_human_bound_of_pycocoevalcap_rounds(
    references: Captions, kit: Toolkit, meteor: MeteorProcess, coco_meteor: Meteor
) -> None:
    bound = evaluation.human_upper_bound(references=references, kit=kit, meteor=meteor)
    rounds = []
    for i in range(5):
        res = {k: [v[i]] for k, v in references.items()}
        gts = {k: v[:i] + v[i + 1 :] for k, v in references.items()}
        rounds.append(direct(gts, res, coco_meteor))
    assert [{k: r[k] for k in rounds[0]} for r in bound.rounds] == rounds
    for name in rounds[0]:
        assert bound.scores[name] == pytest.approx(sum(r[name] for r in rounds) / 5, abs=1e-12)
    assert (bound.clips, bound.skipped, bound.references_per_clip) == (8, 0, {5: 8})


def test_it_skips_clips_with_one_reference_in_the_human_bound(kit: Toolkit) -> None:
    refs = {
        "a": ["a dog barks", "dogs bark loudly", "a dog is barking"],
        "b": ["rain falls", "heavy rain falls"],
        "c": ["only one caption here"],
    }
    bound = evaluation.human_upper_bound(references=refs, metrics=["bleu", "cider"], kit=kit)
    assert (bound.clips, bound.skipped, len(bound.rounds)) == (2, 1, 3)
    assert bound.references_per_clip == {2: 1, 3: 1}


def test_it_refuses_a_human_bound_without_two_references(kit: Toolkit) -> None:
    with pytest.raises(EvaluationError, match="two or more references"):
        evaluation.human_upper_bound(references={"a": ["one"], "b": ["two"]}, kit=kit)


def test_it_computes_only_the_chosen_metrics(
    predictions: dict[str, str], references: Captions, kit: Toolkit, meteor: MeteorProcess
) -> None:
    starts = meteor.starts
    result = evaluation.evaluate(
        predictions=predictions, references=references, metrics=["cider"], kit=kit, meteor=meteor
    )
    assert list(result.scores) == ["CIDEr-D"]
    assert meteor.starts == starts


def test_it_names_unknown_metrics() -> None:
    with pytest.raises(ValueError, match="Unknown metric cidr; choose from bleu, meteor"):
        evaluation.families(["cidr"])


def test_it_keeps_one_meteor_process_for_many_evaluations(
    evaluated: evaluation.Evaluation,
    predictions: dict[str, str],
    references: Captions,
    kit: Toolkit,
    meteor: MeteorProcess,
) -> None:
    again = evaluation.evaluate(
        predictions=predictions, references=references, metrics=["meteor"], kit=kit, meteor=meteor
    )
    assert again.scores["METEOR"] == evaluated.scores["METEOR"]
    assert meteor.starts == 1
    assert meteor.running


def test_it_restarts_a_meteor_process_that_died(
    evaluated: evaluation.Evaluation,
    predictions: dict[str, str],
    references: Captions,
    kit: Toolkit,
    meteor: MeteorProcess,
) -> None:
    assert meteor._proc is not None
    meteor._proc.kill()
    meteor._proc.wait()
    again = evaluation.evaluate(
        predictions=predictions, references=references, metrics=["meteor"], kit=kit, meteor=meteor
    )
    assert again.scores["METEOR"] == evaluated.scores["METEOR"]
    assert meteor.running


def test_it_shares_one_meteor_per_toolkit(kit: Toolkit) -> None:
    assert evaluation_java.shared_meteor(kit) is evaluation_java.shared_meteor(kit)


def test_it_keeps_captions_on_their_clips_across_line_breaks(kit: Toolkit) -> None:
    captions = {"a": ["a dog\u2028barks", "rain\rfalls"], "b": ["a car\x0bpasses\nby"]}
    assert evaluation_java.ptb_tokenize(captions, kit=kit) == {
        "a": ["a dog barks", "rain falls"],
        "b": ["a car passes by"],
    }


def test_it_tokenizes_like_pycocoevalcap(
    references: Captions, predictions: dict[str, str], kit: Toolkit
) -> None:
    captions = {k: [*v, predictions[k]] for k, v in references.items()}
    wrapped = {k: [{"caption": c} for c in v] for k, v in captions.items()}
    expected = PTBTokenizer().tokenize(wrapped)
    assert evaluation_java.ptb_tokenize(captions, kit=kit) == expected


def test_it_runs_from_a_read_only_install(
    tmp_path: Path, predictions: dict[str, str], references: Captions
) -> None:
    source = tmp_path / "site-packages" / "pycocoevalcap"
    source.parent.mkdir()
    subprocess.run(["cp", "-rs", str(evaluation_java.pycocoevalcap_dir()), str(source)], check=True)
    folders = [Path(root) for root, _, _ in os.walk(source)]
    before = sorted(str(p.relative_to(source)) for p in source.rglob("*"))
    for folder in folders:
        folder.chmod(0o555)
    try:
        # the tokenizer and SPICE write files; METEOR only reads its jar
        kit = evaluation_java.toolkit(tmp_path / "cache", source=source)
        result = evaluation.evaluate(
            predictions=predictions, references=references, metrics=["bleu", "cider"], kit=kit
        )
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert sorted(str(p.relative_to(source)) for p in source.rglob("*")) == before
    assert kit.root.is_relative_to(tmp_path / "cache")
    assert result.scores["BLEU-4"] is not None


@pytest.mark.parametrize(
    ("predictions", "references", "message"),
    [
        ({"a": "x"}, {"a": ["y"], "b": ["z"]}, "1 clip(s) have no prediction ('b')"),
        ({"a": "x", "c": "w"}, {"a": ["y"]}, "1 prediction(s) name clips without references"),
        ({"a": " "}, {"a": ["y"]}, "1 clip(s) have an empty caption ('a')"),
        ({"a": "x"}, {"a": []}, "1 clip(s) have an empty reference list ('a')"),
        ({}, {}, "no references"),
    ],
)
def test_it_names_what_is_wrong_with_the_inputs(
    predictions: dict[str, str], references: Captions, message: str
) -> None:
    with pytest.raises(EvaluationError) as caught:
        evaluation.check_inputs(predictions, references)
    assert message in str(caught.value)


def test_it_prints_a_table_with_the_reasons(evaluated: evaluation.Evaluation) -> None:
    table = evaluation.format_table(evaluated.scores, evaluated.unavailable)
    assert f"CIDEr-D   {evaluated.scores['CIDEr-D']:.4f}" in table
    assert "SPICE     unavailable" in table
    assert "SPICE: SPICE needs Stanford CoreNLP 3.6.0" in table


def test_it_serialises_its_result(evaluated: evaluation.Evaluation) -> None:
    data: dict[str, Any] = evaluated.as_dict()
    assert data["pycocoevalcap"] == "1.2"
    assert "CIDEr-D" in data["cider"]
    assert "per_clip" not in data
    assert set(evaluated.as_dict(per_clip=True)["per_clip"]) == set(evaluated.per_clip)


def test_it_closes_meteor_cleanly(meteor: MeteorProcess) -> None:
    # last in the module: it stops the module's METEOR
    meteor.score({"a": ["a dog barks"]}, {"a": ["a dog is barking"]})
    jvm = meteor._proc
    assert jvm is not None
    meteor.close()
    assert jvm.poll() is not None  # exited, on its own, at the end of its input
    assert not meteor.running
