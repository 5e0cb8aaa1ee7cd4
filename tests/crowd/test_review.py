"""Review: approve, reject with a reason (the slot re-opens), fix then approve, bulk
approval of one worker's work, and the queue's order."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from annotation.models import Assignment, Batch, Caption, Hit
from annotation.services import hit_claim
from core.models import Project, Role
from core.services import membership_add
from crowd.models import REASON_FEEDBACK, LedgerEntry, RejectReason, Review
from crowd.records import flag_create
from crowd.services import (
    review_approve,
    review_queue,
    review_reject,
    worker_approve_all,
)
from tests.crowd.conftest import MakeBatch, Submit


def test_it_reopens_the_slot_of_a_rejected_assignment(
    make_batch: MakeBatch, submit: Submit, ann: Any, abe: Any, rey: Any
) -> None:
    make_batch(clips=1, captions_per_clip=1)
    assignment = submit(ann)
    assert hit_claim(worker=abe) is None  # the only slot is taken

    review_reject(assignment=assignment, reviewer=rey, reason=RejectReason.TRANSCRIBES_SPEECH)

    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.REJECTED
    assert Hit.objects.get().taken == 0
    reopened = hit_claim(worker=abe)
    assert reopened is not None
    assert reopened.hit_id == assignment.hit_id


def test_it_records_the_reason_and_sends_its_standard_feedback(
    batch: Batch, submit: Submit, ann: Any, rey: Any
) -> None:
    assignment = review_reject(
        assignment=submit(ann), reviewer=rey, reason=RejectReason.WRONG_TENSE
    )
    review = Review.objects.get(assignment=assignment)
    assert (review.decision, review.reason, review.reviewer) == ("rejected", "tense", rey)
    assert assignment.feedback == REASON_FEEDBACK[RejectReason.WRONG_TENSE]
    assert not LedgerEntry.objects.exists()  # no pay for rejected work


def test_it_sends_the_reviewers_own_feedback_when_given(
    batch: Batch, submit: Submit, ann: Any, rey: Any
) -> None:
    assignment = review_reject(
        assignment=submit(ann), reviewer=rey, reason="hints", feedback="  Write a sentence.  "
    )
    assert assignment.feedback == "Write a sentence."


def test_it_refuses_an_unknown_reason_and_changes_nothing(
    batch: Batch, submit: Submit, ann: Any, rey: Any
) -> None:
    assignment = submit(ann)
    with pytest.raises(ValidationError, match="Unknown reason 'rude'"):
        review_reject(assignment=assignment, reviewer=rey, reason="rude")
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.SUBMITTED
    assert not Review.objects.exists()


def test_it_books_the_reward_with_the_approval(
    make_batch: MakeBatch, submit: Submit, ann: Any, rey: Any
) -> None:
    batch = make_batch(reward_cents=25)
    assignment = review_approve(assignment=submit(ann), reviewer=rey, feedback="Nice.")
    assert assignment.state == Assignment.State.APPROVED
    entry = LedgerEntry.objects.get()
    assert (entry.kind, entry.worker, entry.batch, entry.amount_cents) == (
        "reward",
        ann,
        batch,
        25,
    )
    assert Review.objects.get().decision == "approved"


def test_it_keeps_both_versions_when_fixing_then_approves(
    batch: Batch, submit: Submit, ann: Any, rey: Any
) -> None:
    assignment = submit(ann, text="a dog barked while cars pass by")
    caption = assignment.captions.get()
    review_approve(
        assignment=assignment,
        reviewer=rey,
        fixes={caption.pk: "  a dog barks while cars pass by "},
    )
    caption.refresh_from_db()
    assert caption.text == "a dog barked while cars pass by"
    assert caption.fixed_text == "a dog barks while cars pass by"
    assert caption.fixed_by == rey
    assert caption.fixed_at is not None
    assert caption.current_text == "a dog barks while cars pass by"
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.APPROVED


def test_it_refuses_a_fix_that_breaks_the_caption_rules_and_approves_nothing(
    batch: Batch, submit: Submit, ann: Any, rey: Any
) -> None:
    assignment = submit(ann)
    caption = assignment.captions.get()
    with pytest.raises(ValidationError) as info:
        review_approve(assignment=assignment, reviewer=rey, fixes={caption.pk: "dog"})
    assert "The fixed caption has 1 word" in str(info.value)
    caption.refresh_from_db()
    assignment.refresh_from_db()
    assert caption.fixed_text == ""
    assert assignment.state == Assignment.State.SUBMITTED
    assert not LedgerEntry.objects.exists()


def test_it_refuses_to_fix_a_caption_of_another_assignment(
    batch: Batch, submit: Submit, ann: Any, abe: Any, rey: Any
) -> None:
    mine, other = submit(ann), submit(abe)
    foreign = other.captions.get()
    with pytest.raises(ValidationError, match="not part of this assignment"):
        review_approve(assignment=mine, reviewer=rey, fixes={foreign.pk: "a cat purrs softly"})
    foreign.refresh_from_db()
    assert foreign.fixed_text == ""


@pytest.mark.parametrize("persona", ["ann", "rex", "olive"])
def test_it_lets_only_reviewers_of_the_project_decide(
    batch: Batch, submit: Submit, ann: Any, request: pytest.FixtureRequest, persona: str
) -> None:
    assignment = submit(ann)
    user = request.getfixturevalue(persona)
    with pytest.raises(PermissionDenied):
        review_approve(assignment=assignment, reviewer=user)
    with pytest.raises(PermissionDenied):
        review_reject(assignment=assignment, reviewer=user, reason="off_topic")
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.SUBMITTED


def test_it_lets_researchers_review_too(batch: Batch, submit: Submit, ann: Any, alice: Any) -> None:
    assert review_approve(assignment=submit(ann), reviewer=alice).state == "approved"


def test_it_bulk_approves_only_that_workers_submitted_work_in_that_project(
    project: Project,
    make_batch: MakeBatch,
    submit: Submit,
    ann: Any,
    abe: Any,
    rey: Any,
    olive: Any,
) -> None:
    batch = make_batch(clips=3, captions_per_clip=2)
    first, second, third = submit(ann), submit(ann), submit(ann)
    abes = submit(abe)
    # Ann's submitted work in another project, which Rey does not review
    birds = Project.objects.get(slug="birds")
    membership_add(project=birds, user=ann, role=Role.ANNOTATOR)
    elsewhere = submit(ann, batch=make_batch(clips=1, project=birds, created_by=olive))

    n = worker_approve_all(project=batch.project, worker=ann, reviewer=rey)

    assert n == 3
    states = dict(Assignment.objects.values_list("pk", "state"))
    assert states[first.pk] == states[second.pk] == states[third.pk] == "approved"
    assert states[abes.pk] == "submitted"
    assert states[elsewhere.pk] == "submitted"
    assert LedgerEntry.objects.filter(worker=ann).count() == 3


def test_it_leaves_accepted_work_out_of_a_bulk_approval(batch: Batch, ann: Any, rey: Any) -> None:
    accepted = hit_claim(worker=ann)
    assert worker_approve_all(project=batch.project, worker=ann, reviewer=rey) == 0
    assert accepted is not None
    accepted.refresh_from_db()
    assert accepted.state == Assignment.State.ACCEPTED


def test_it_refuses_bulk_approval_to_a_reviewer_of_another_project(
    batch: Batch, submit: Submit, ann: Any, rex: Any
) -> None:
    submit(ann)
    with pytest.raises(PermissionDenied):
        worker_approve_all(project=batch.project, worker=ann, reviewer=rex)
    assert not Assignment.objects.filter(state="approved").exists()


def test_it_orders_the_queue_flagged_first_then_oldest(
    make_batch: MakeBatch, submit: Submit, ann: Any, abe: Any
) -> None:
    batch = make_batch(clips=3, captions_per_clip=1)
    start = timezone.now()
    oldest = submit(ann, now=start - timedelta(hours=3))
    middle = submit(ann, now=start - timedelta(hours=2))
    newest = submit(abe, now=start - timedelta(hours=1))
    flag_create(caption=newest.captions.get(), reason="model disagrees", evidence={"cider": 0.1})

    order = list(review_queue(project=batch.project).values_list("pk", flat=True))

    assert order == [newest.pk, oldest.pk, middle.pk]


def test_it_keeps_reviewed_work_out_of_the_queue(
    batch: Batch, submit: Submit, ann: Any, abe: Any, rey: Any
) -> None:
    reviewed, waiting = submit(ann), submit(abe)
    review_approve(assignment=reviewed, reviewer=rey)
    assert list(review_queue(project=batch.project)) == [waiting]


def test_it_refuses_a_flag_without_a_reason(batch: Batch, submit: Submit, ann: Any) -> None:
    caption = submit(ann).captions.get()
    with pytest.raises(ValidationError):
        flag_create(caption=caption, reason="   ")
    assert not Caption.objects.get().flags.exists()


def test_it_refuses_a_fix_that_starts_a_formula_once_normalised(
    batch: Batch, submit: Submit, ann: Any, rey: Any
) -> None:
    assignment = submit(ann)
    caption = assignment.captions.get()
    with pytest.raises(ValidationError, match="would run as a formula"):
        review_approve(
            assignment=assignment,
            reviewer=rey,
            fixes={caption.pk: "\u2002=HYPERLINK(1) a dog barks while cars pass by"},
        )
    caption.refresh_from_db()
    assert caption.fixed_text == ""
