"""The evaluate and human_upper_bound commands, the evaluation job kinds, and the references
of a project split. Real Java; the commands run in this process and share its warm METEOR."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Assignment
from core.jobs import JOB_KINDS
from core.models import Job, Project
from corpus import evaluation
from corpus.evaluation_files import clip_key, read_predictions, read_references
from corpus.evaluation_services import evaluation_toolkit, split_references
from corpus.services import captions_import
from tests.conftest import FIXTURES
from tests.corpus.conftest import crowd_caption

EVAL = FIXTURES / "evaluation"
REFERENCES = EVAL / "audiocaps_references.csv"
PREDICTIONS = EVAL / "audiocaps_predictions.csv"


def run(command: str, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(command, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def test_split(project: Project, alice: Any) -> Project:
    """The fixture's 8 AudioCaps clips imported as the project's test split."""
    captions_import(
        project=project, path=REFERENCES, fmt="audiocaps", split="test", imported_by=alice
    )
    return project


def test_it_registers_the_job_kinds_on_the_text_queue() -> None:
    assert JOB_KINDS["captions_evaluate"].queue == "text"
    assert JOB_KINDS["captions_human_bound"].queue == "text"
    assert JOB_KINDS["captions_evaluate"].load().__name__ == "evaluation_job"


def test_it_prints_the_scores_as_json(db: None) -> None:
    out, _ = run(
        "evaluate", "--predictions", str(PREDICTIONS), "--references", str(REFERENCES), "--json"
    )
    printed = json.loads(out)
    expected = evaluation.evaluate(
        predictions=read_predictions(PREDICTIONS),
        references=read_references(REFERENCES),
        kit=evaluation_toolkit(),
    )
    assert printed["scores"] == expected.scores
    assert (printed["clips"], printed["references"]) == (8, 40)
    job = Job.objects.get(kind="captions_evaluate")
    assert job.state == Job.State.SUCCEEDED
    assert job.result == printed


def test_it_prints_a_table_by_default(db: None) -> None:
    out, err = run("evaluate", "--predictions", str(PREDICTIONS), "--references", str(REFERENCES))
    assert out.splitlines()[0] == "metric    score"
    assert "METEOR    0." in out
    assert "SPIDEr    unavailable" in out
    assert "SPICE: SPICE needs Stanford CoreNLP 3.6.0" in out
    assert "tokenizing" in err  # progress goes to stderr


def test_it_evaluates_against_a_project_split(test_split: Project) -> None:
    out, _ = run(
        "evaluate",
        *("--predictions", str(EVAL / "audiocaps_predictions.jsonl")),
        *("--project", "sounds", "--split", "test", "--metrics", "bleu,cider", "--json"),
    )
    result = json.loads(out)
    assert (result["clips"], result["split"]) == (8, "test")
    assert list(result["scores"]) == [*evaluation.BLEU, "CIDEr-D"]
    assert Job.objects.get(kind="captions_evaluate").project == test_split


def test_it_refuses_a_bad_file_with_its_line_and_runs_nothing(db: None, tmp_path: Path) -> None:
    bad = tmp_path / "p.csv"
    bad.write_text("id,caption\n7fmOlUlwoNg_20,a machine\n6BJ455B1aAs_0,\n")
    with pytest.raises(CommandError, match=r"p\.csv, line 3: the caption is empty"):
        run("evaluate", "--predictions", str(bad), "--references", str(REFERENCES))
    assert not Job.objects.exists()


def test_it_names_clips_without_a_prediction(db: None, tmp_path: Path) -> None:
    partial = tmp_path / "p.jsonl"
    partial.write_text('{"id": "7fmOlUlwoNg_20", "caption": "a machine"}\n')
    with pytest.raises(CommandError, match=r"7 clip\(s\) have no prediction \('6BJ455B1aAs_0'"):
        run("evaluate", "--predictions", str(partial), "--references", str(REFERENCES))


def test_it_wants_references_or_a_project(db: None) -> None:
    with pytest.raises(CommandError, match="either --references FILE or --project"):
        run("evaluate", "--predictions", str(PREDICTIONS))


def test_it_names_unknown_metrics_on_the_command_line(db: None) -> None:
    with pytest.raises(CommandError, match="--metrics: unknown cidr"):
        run(
            "evaluate",
            *("--predictions", str(PREDICTIONS), "--references", str(REFERENCES)),
            *("--metrics", "bleu,cidr"),
        )


def test_it_prints_the_human_bound_of_a_file(db: None) -> None:
    out, _ = run("human_upper_bound", str(REFERENCES), "--format", "audiocaps", "--json")
    printed = json.loads(out)
    bound = evaluation.human_upper_bound(
        references=read_references(REFERENCES), kit=evaluation_toolkit()
    )
    assert printed["scores"] == bound.scores
    assert (printed["clips"], len(printed["rounds"]), printed["skipped"]) == (8, 5, 0)


def test_it_prints_the_human_bound_of_a_clotho_file_as_a_table(db: None) -> None:
    out, _ = run(
        "human_upper_bound",
        *(str(EVAL / "clotho_references.csv"), "--format", "clotho", "--metrics", "bleu,cider"),
    )
    assert "CIDEr-D   " in out
    assert "4 clips (4 with 5 references), 5 rounds" in out


def test_it_prints_the_human_bound_of_a_project_split(test_split: Project) -> None:
    out, _ = run(
        "human_upper_bound",
        *("--project", "sounds", "--split", "test", "--metrics", "cider", "--json"),
    )
    bound = evaluation.human_upper_bound(
        references=read_references(REFERENCES), metrics=["cider"], kit=evaluation_toolkit()
    )
    assert json.loads(out)["scores"] == bound.scores


def test_it_wants_a_format_for_a_file(db: None) -> None:
    with pytest.raises(CommandError, match="PATH needs --format audiocaps or --format clotho"):
        run("human_upper_bound", str(REFERENCES))


def test_it_fails_the_job_with_a_clear_error_for_an_empty_split(project: Project) -> None:
    with pytest.raises(CommandError, match="The val split of sounds has no approved captions"):
        run("human_upper_bound", "--project", "sounds", "--split", "val")
    assert Job.objects.get().state == Job.State.FAILED


def test_it_takes_approved_and_imported_captions_of_a_split(
    test_split: Project, ann: Any, abe: Any, rey: Any
) -> None:
    approved = crowd_caption(test_split, ann, "a dog barks", split="test")
    crowd_caption(test_split, abe, "rejected words", split="test", clip=approved.clip)
    rejected = Assignment.objects.get(worker=abe)
    Assignment.objects.filter(pk=rejected.pk).update(state=Assignment.State.REJECTED)
    crowd_caption(test_split, abe, "still waiting", state=Assignment.State.SUBMITTED, split="test")
    approved.fixed_text = "a dog barks twice"
    approved.save(update_fields=["fixed_text"])
    refs = split_references(project=test_split, split="test")
    assert refs[clip_key(approved.clip.youtube_id, approved.clip.start_seconds)] == [
        "a dog barks twice"
    ]
    imported = read_references(REFERENCES)
    assert {k: v for k, v in refs.items() if k in imported} == imported
    assert len(refs) == 9


def test_it_keeps_other_projects_captions_out_of_a_split(test_split: Project, olive: Any) -> None:
    birds = Project.objects.get(slug="birds")
    crowd_caption(birds, olive, "a bird sings", split="test")
    assert len(split_references(project=test_split, split="test")) == 8
    assert list(split_references(project=birds, split="test").values()) == [["a bird sings"]]


@pytest.mark.shared_data
def test_it_prints_the_audiocaps_test_human_bound(shared_data: Path, db: None) -> None:
    out, _ = run(
        "human_upper_bound",
        *(str(shared_data / "audiocaps" / "test.csv"), "--format", "audiocaps"),
        *("--metrics", "bleu,rouge,cider", "--json"),
    )
    scores = json.loads(out)["scores"]
    # the numbers recorded in benchmarks/RESULTS.md
    assert scores["BLEU-1"] == pytest.approx(0.6541, abs=5e-5)
    assert scores["BLEU-4"] == pytest.approx(0.2905, abs=5e-5)
    assert scores["ROUGE-L"] == pytest.approx(0.4949, abs=5e-5)
    assert scores["CIDEr-D"] == pytest.approx(0.9076, abs=5e-5)
