"""Post-processing approved captions, the approval trigger, the job and command, revert,
vocabulary."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import CommandError, call_command

from annotation.models import Assignment
from annotation.services import assignment_review
from core.models import Job, Project
from curation.models import Split, Subset, SubsetClip
from earmark.celery import app
from postprocessing import services
from postprocessing.models import ProcessedCaption, VocabularyEntry
from tests.postprocessing.conftest import MakeCaption
from tests.postprocessing.lt_server import FakeLanguageTool

pytestmark = pytest.mark.django_db


def _process(*captions: Any) -> dict[str, Any]:
    return services.captions_postprocess(caption_ids=[c.pk for c in captions])


def test_it_stores_the_processed_caption(
    approved: MakeCaption, lt_server: FakeLanguageTool
) -> None:
    caption = approved("A owl hoots 2 times.")
    result = _process(caption)
    processed = ProcessedCaption.objects.get(caption=caption)
    assert processed.final_text == "An owl hoots two times"
    assert processed.train_text == "an owl hoots two times"
    assert processed.tokens == ["An", "owl", "hoots", "two", "times"]
    assert processed.source_text == "A owl hoots 2 times."
    assert processed.grammar_status == "applied"
    assert len(processed.steps) == 6
    assert result["processed"] == 1
    assert result["grammar_applied"] == 1
    caption.refresh_from_db()
    assert caption.text == "A owl hoots 2 times."  # the raw caption is kept


def test_without_languagetool_it_records_the_skip(approved: MakeCaption) -> None:
    caption = approved("A owl hoots.")
    result = _process(caption)
    processed = ProcessedCaption.objects.get(caption=caption)
    assert processed.grammar_status == "skipped"
    assert processed.final_text == "A owl hoots"
    grammar = processed.grammar_step
    assert grammar is not None
    assert "LANGUAGETOOL_URL and LTP_JAR_DIR_PATH" in grammar["reason"]
    assert result["grammar_skipped"] == 1
    assert result["grammar_skip_reason"] == grammar["reason"]


def test_it_processes_the_reviewers_fix(approved: MakeCaption) -> None:
    caption = approved("A dgo barks")
    caption.fixed_text = "A dog barks loudly."
    caption.save()
    _process(caption)
    assert ProcessedCaption.objects.get(caption=caption).final_text == "A dog barks loudly"


def test_reprocessing_updates_the_same_row(approved: MakeCaption) -> None:
    caption = approved("A dog barks.")
    _process(caption)
    caption.fixed_text = "Two dogs bark."
    caption.save()
    _process(caption)
    assert ProcessedCaption.objects.filter(caption=caption).count() == 1
    assert ProcessedCaption.objects.get(caption=caption).final_text == "Two dogs bark"


def test_pending_captions_are_new_changed_or_of_another_version(
    approved: MakeCaption, imported: MakeCaption
) -> None:
    done, changed, old, new, crowd_new = (
        approved("done"),
        approved("changed"),
        approved("old"),
        imported("new"),
        approved("new crowd"),
    )
    submitted = approved("not approved yet", state=Assignment.State.SUBMITTED)
    _process(done, changed, old, submitted)
    changed.fixed_text = "changed again"
    changed.save()
    ProcessedCaption.objects.filter(caption=old).update(pipeline_version="0")
    pending = set(services.captions_pending().values_list("pk", flat=True))
    assert pending == {changed.pk, old.pk, new.pk, crowd_new.pk}
    everything = set(services.captions_pending(everything=True).values_list("pk", flat=True))
    assert everything == pending | {done.pk}


def test_project_captions_leave_out_other_projects(
    approved: MakeCaption, imported: MakeCaption, olive: Any
) -> None:
    mine = [approved("a dog barks"), imported("a cat purrs")]
    imported("a bird sings", into=Project.objects.get(slug="birds"))
    project = Project.objects.get(slug="sounds")
    assert set(services.project_captions(project)) == set(mine)


def test_a_project_job_writes_nothing_for_another_project_import_on_a_shared_clip(
    imported: MakeCaption, olive: Any
) -> None:
    theirs = imported("a cat purrs")  # imported into sounds
    birds = Project.objects.get(slug="birds")
    # birds selects the same AudioSet segment into a subset of its own
    subset = Subset.objects.create(project=birds, name="Cats", slug="cats")
    SubsetClip.objects.create(subset=subset, clip=theirs.clip, split=Split.TRAIN)

    call_command("postprocess_captions", "--project", "birds", stdout=None)

    assert Job.objects.get(kind="captions_postprocess").result["processed"] == 0
    assert not ProcessedCaption.objects.filter(caption=theirs).exists()
    assert theirs not in services.project_captions(birds)
    assert services.caption_projects([theirs.pk]) == {theirs.imported_into_id}


@pytest.fixture
def eager() -> Iterator[None]:
    """Tasks run inline where they are sent, so the text queue's work can be checked."""
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


@pytest.mark.usefixtures("eager")
def test_approving_an_assignment_post_processes_its_captions(
    approved: MakeCaption, rey: Any, django_capture_on_commit_callbacks: Any
) -> None:
    caption = approved("A dog barks 3 times.", state=Assignment.State.SUBMITTED)
    assert caption.assignment is not None
    with django_capture_on_commit_callbacks(execute=True):
        assignment_review(assignment=caption.assignment, reviewer=rey, approve=True)
    assert ProcessedCaption.objects.get(caption=caption).final_text == "A dog barks three times"


@pytest.mark.usefixtures("eager")
def test_rejecting_an_assignment_does_not(
    approved: MakeCaption, rey: Any, django_capture_on_commit_callbacks: Any
) -> None:
    caption = approved("A dog barks.", state=Assignment.State.SUBMITTED)
    assert caption.assignment is not None
    with django_capture_on_commit_callbacks(execute=True):
        assignment_review(assignment=caption.assignment, reviewer=rey, approve=False)
    assert not ProcessedCaption.objects.filter(caption=caption).exists()


def test_a_broker_failure_does_not_undo_the_approval(
    approved: MakeCaption, rey: Any, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    caption = approved("A dog barks.", state=Assignment.State.SUBMITTED)
    assignment = caption.assignment
    assert assignment is not None
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assignment_review(assignment=assignment, reviewer=rey, approve=True)
    assert len(callbacks) >= 1  # the send waits for the commit; it is robust (logged)
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.APPROVED


def test_the_command_processes_pending_captions_and_builds_the_vocabulary(
    approved: MakeCaption, lt_server: FakeLanguageTool
) -> None:
    approved("A owl hoots.")
    approved("A dog barks at a owl.")
    call_command("postprocess_captions", "--project", "sounds", stdout=None)
    job = Job.objects.get(kind="captions_postprocess")
    assert job.state == Job.State.SUCCEEDED
    assert job.result["processed"] == 2
    vocabulary = dict(VocabularyEntry.objects.values_list("token", "count"))
    assert vocabulary == {"an": 2, "owl": 2, "hoots": 1, "a": 1, "dog": 1, "barks": 1, "at": 1}


def test_the_command_takes_a_batch_and_reprocesses_all(approved: MakeCaption) -> None:
    for i in range(3):
        approved(f"dog number {i}")
    call_command("postprocess_captions", "--batch", "2")
    assert ProcessedCaption.objects.count() == 2
    call_command("postprocess_captions")
    assert ProcessedCaption.objects.count() == 3
    call_command("postprocess_captions", "--all")
    last = Job.objects.filter(kind="captions_postprocess").first()
    assert last is not None
    assert last.result["processed"] == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--project", "nope"], "No project with slug 'nope'"), (["--batch", "0"], "at least 1")],
)
def test_the_command_refuses_bad_arguments(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("postprocess_captions", *args)


# Revert ------------------------------------------------------------------------------------


@pytest.fixture
def corrected(approved: MakeCaption, lt_server: FakeLanguageTool) -> ProcessedCaption:
    caption = approved("A owl hoots at a eagle.")
    _process(caption)
    return ProcessedCaption.objects.get(caption=caption)


def test_a_reviewer_reverts_the_grammar_correction(
    corrected: ProcessedCaption, project: Project, rey: Any
) -> None:
    assert corrected.final_text == "An owl hoots at an eagle"
    services.processed_grammar_revert(processed=corrected, project=project, user=rey)
    corrected.refresh_from_db()
    assert corrected.final_text == "A owl hoots at a eagle"
    assert corrected.train_text == "a owl hoots at a eagle"
    assert corrected.tokens == ["A", "owl", "hoots", "at", "a", "eagle"]
    assert (corrected.grammar_reverted, corrected.grammar_reverted_by) == (True, rey)
    grammar = corrected.grammar_step
    assert grammar is not None
    assert grammar["status"] == "skipped"
    assert grammar["reverted"]["correction"] == "An owl hoots at an eagle"
    tokenise = corrected.step("tokenise")
    assert tokenise is not None
    assert tokenise["before"] == "A owl hoots at a eagle"


def test_reprocessing_keeps_a_reverted_caption_uncorrected(
    corrected: ProcessedCaption, project: Project, alice: Any
) -> None:
    services.processed_grammar_revert(processed=corrected, project=project, user=alice)
    services.captions_postprocess(caption_ids=[corrected.caption_id])
    corrected.refresh_from_db()
    assert corrected.final_text == "A owl hoots at a eagle"
    grammar = corrected.grammar_step
    assert grammar is not None
    assert grammar["reason"] == "reverted by a reviewer"


def test_reverting_twice_is_refused(
    corrected: ProcessedCaption, project: Project, rey: Any
) -> None:
    services.processed_grammar_revert(processed=corrected, project=project, user=rey)
    with pytest.raises(ValidationError, match="already reverted"):
        services.processed_grammar_revert(processed=corrected, project=project, user=rey)


def test_an_uncorrected_caption_has_nothing_to_revert(
    approved: MakeCaption, project: Project, rey: Any
) -> None:
    caption = approved("A dog barks")
    _process(caption)
    with pytest.raises(ValidationError, match="Nothing to revert"):
        services.processed_grammar_revert(processed=caption.processed, project=project, user=rey)


def test_an_annotator_cannot_revert(
    corrected: ProcessedCaption, project: Project, ann: Any
) -> None:
    with pytest.raises(PermissionDenied):
        services.processed_grammar_revert(processed=corrected, project=project, user=ann)
    corrected.refresh_from_db()
    assert not corrected.grammar_reverted


def test_a_caption_of_another_project_cannot_be_reverted_through_it(
    corrected: ProcessedCaption, olive: Any
) -> None:
    birds = Project.objects.get(slug="birds")
    with pytest.raises(PermissionDenied):
        services.processed_grammar_revert(processed=corrected, project=birds, user=olive)


# Vocabulary -------------------------------------------------------------------------------


def test_the_vocabulary_counts_approved_processed_captions(
    approved: MakeCaption, imported: MakeCaption, project: Project
) -> None:
    captions = [approved("A dog barks."), imported("Dogs bark, a dog whines!")]
    rejected = approved("A cat meows", state=Assignment.State.REJECTED)
    _process(*captions, rejected)
    imported("Unprocessed words here")
    built = services.vocabulary_rebuild(project=project)
    vocabulary = dict(project.vocabulary.values_list("token", "count"))
    assert vocabulary == {"a": 2, "dog": 2, "barks": 1, "dogs": 1, "bark": 1, "whines": 1}
    assert built == {
        "captions": 2,
        "unprocessed": 1,
        "tokens": 6,
        "token_occurrences": 8,
        "left_out_too_long": 0,
    }


def test_a_rebuild_replaces_the_old_vocabulary(approved: MakeCaption, project: Project) -> None:
    caption = approved("A dog barks")
    _process(caption)
    services.vocabulary_rebuild(project=project)
    caption.fixed_text = "A cat meows"
    caption.save()
    _process(caption)
    services.vocabulary_rebuild(project=project)
    assert set(project.vocabulary.values_list("token", flat=True)) == {"a", "cat", "meows"}


def test_the_vocabulary_leaves_out_tokens_too_long_to_store(
    approved: MakeCaption, project: Project
) -> None:
    _process(approved("a " + "z" * 300))
    built = services.vocabulary_rebuild(project=project)
    assert built["left_out_too_long"] == 1
    assert list(project.vocabulary.values_list("token", flat=True)) == ["a"]
