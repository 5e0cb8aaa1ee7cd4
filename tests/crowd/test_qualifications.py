"""Qualification tests: created on project clips, taken under the HIT's caption rules,
graded by a reviewer; a failed worker may try again."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from core.models import Project
from crowd.models import Qualification, QualificationAnswer, QualificationAttempt
from crowd.services import (
    qualification_create,
    qualification_grade,
    qualification_set_gold,
    qualification_submit,
)
from tests.annotation.factories import make_clips, make_subset

GOOD = "a dog barks while cars pass by"


def _answers(qualification: Qualification, text: str = GOOD) -> dict[int, str]:
    return dict.fromkeys(qualification.items.values_list("clip_id", flat=True), text)


def test_it_creates_a_test_on_the_projects_clips_in_the_order_given(
    project: Project, alice: Any
) -> None:
    clips = make_clips(3)
    make_subset(project, clips)
    ids = f"{clips[2].pk}, {clips[0].pk} {clips[2].pk}"  # commas, spaces, a repeat
    qualification = qualification_create(
        project=project, created_by=alice, name="Test", clip_ids=ids
    )
    assert list(qualification.items.values_list("clip_id", flat=True)) == [
        clips[2].pk,
        clips[0].pk,
    ]


def test_it_names_clips_that_are_not_the_projects(project: Project, alice: Any) -> None:
    ours = make_clips(1)[0]
    make_subset(project, [ours])
    stranger = make_clips(1)[0]  # in no subset of the project
    with pytest.raises(ValidationError, match=rf"Clips \[{stranger.pk}\] are not clips of"):
        qualification_create(
            project=project, created_by=alice, name="T", clip_ids=f"{ours.pk},{stranger.pk}"
        )
    assert not Qualification.objects.exists()


def test_it_names_a_token_that_is_not_a_clip_id(project: Project, alice: Any) -> None:
    with pytest.raises(ValidationError, match="'12a' is not a clip id"):
        qualification_create(project=project, created_by=alice, name="T", clip_ids="3, 12a")


def test_it_lets_only_researchers_create_tests(project: Project, rey: Any) -> None:
    clip = make_clips(1)[0]
    make_subset(project, [clip])
    with pytest.raises(PermissionDenied):
        qualification_create(project=project, created_by=rey, name="T", clip_ids=str(clip.pk))


def test_it_stores_an_attempt_for_review(qualification: Qualification, ann: Any) -> None:
    attempt = qualification_submit(
        qualification=qualification, worker=ann, answers=_answers(qualification)
    )
    assert attempt.state == QualificationAttempt.State.SUBMITTED
    assert set(attempt.answers.values_list("text", flat=True)) == {GOOD}


def test_it_applies_the_caption_rules_and_stores_nothing_on_a_violation(
    qualification: Qualification, ann: Any
) -> None:
    answers = _answers(qualification)
    first = next(iter(answers))
    answers[first] = "dog"
    with pytest.raises(ValidationError) as info:
        qualification_submit(qualification=qualification, worker=ann, answers=answers)
    assert info.value.message_dict[f"caption-{first}"] == [
        "The caption for clip 1 has 1 word; write at least 3."
    ]
    assert not QualificationAttempt.objects.exists()
    assert not QualificationAnswer.objects.exists()


def test_it_needs_an_answer_for_every_clip(qualification: Qualification, ann: Any) -> None:
    answers = _answers(qualification)
    answers.popitem()
    with pytest.raises(ValidationError, match="is empty"):
        qualification_submit(qualification=qualification, worker=ann, answers=answers)


def test_it_refuses_a_second_attempt_while_one_is_in_review(
    qualification: Qualification, ann: Any
) -> None:
    qualification_submit(qualification=qualification, worker=ann, answers=_answers(qualification))
    with pytest.raises(ValidationError, match="already have an attempt"):
        qualification_submit(
            qualification=qualification, worker=ann, answers=_answers(qualification)
        )
    assert QualificationAttempt.objects.count() == 1


@pytest.mark.parametrize("persona", ["rey", "alice", "olive"])
def test_it_lets_only_annotators_of_the_project_take_it(
    qualification: Qualification, request: pytest.FixtureRequest, persona: str
) -> None:
    with pytest.raises(PermissionDenied):
        qualification_submit(
            qualification=qualification,
            worker=request.getfixturevalue(persona),
            answers=_answers(qualification),
        )


def test_it_passes_a_worker_on_approval(qualification: Qualification, ann: Any, rey: Any) -> None:
    attempt = qualification_submit(
        qualification=qualification, worker=ann, answers=_answers(qualification)
    )
    attempt = qualification_grade(attempt=attempt, reviewer=rey, approve=True, feedback="Good.")
    attempt.refresh_from_db()
    assert attempt.state == QualificationAttempt.State.APPROVED
    assert attempt.reviewer == rey
    assert attempt.feedback == "Good."


def test_it_needs_feedback_to_fail_a_worker(
    qualification: Qualification, ann: Any, rey: Any
) -> None:
    attempt = qualification_submit(
        qualification=qualification, worker=ann, answers=_answers(qualification)
    )
    with pytest.raises(ValidationError, match="what to do better"):
        qualification_grade(attempt=attempt, reviewer=rey, approve=False)
    attempt.refresh_from_db()
    assert attempt.state == QualificationAttempt.State.SUBMITTED


def test_it_lets_a_failed_worker_try_again(
    qualification: Qualification, ann: Any, rey: Any
) -> None:
    attempt = qualification_submit(
        qualification=qualification, worker=ann, answers=_answers(qualification)
    )
    qualification_grade(attempt=attempt, reviewer=rey, approve=False, feedback="Be specific.")
    again = qualification_submit(
        qualification=qualification, worker=ann, answers=_answers(qualification)
    )
    assert again.pk != attempt.pk


def test_it_grades_an_attempt_once(qualification: Qualification, ann: Any, rey: Any) -> None:
    attempt = qualification_submit(
        qualification=qualification, worker=ann, answers=_answers(qualification)
    )
    qualification_grade(attempt=attempt, reviewer=rey, approve=True)
    with pytest.raises(ValidationError, match="already graded"):
        qualification_grade(attempt=attempt, reviewer=rey, approve=False, feedback="No.")


@pytest.mark.parametrize("persona", ["ann", "rex"])
def test_it_lets_only_reviewers_of_the_project_grade(
    qualification: Qualification, abe: Any, request: pytest.FixtureRequest, persona: str
) -> None:
    attempt = qualification_submit(
        qualification=qualification, worker=abe, answers=_answers(qualification)
    )
    with pytest.raises(PermissionDenied):
        qualification_grade(
            attempt=attempt, reviewer=request.getfixturevalue(persona), approve=True
        )


def test_it_stores_gold_captions(qualification: Qualification, alice: Any) -> None:
    first = qualification.items.first()
    assert first is not None
    clip_id = first.clip_id
    assert (
        qualification_set_gold(
            qualification=qualification, by=alice, golds={clip_id: "  a siren wails  "}
        )
        == 1
    )
    assert qualification.items.get(clip_id=clip_id).gold_caption == "a siren wails"


def test_it_refuses_gold_for_a_clip_outside_the_test(
    qualification: Qualification, alice: Any
) -> None:
    with pytest.raises(ValidationError, match=r"Clips \[999999\] are not part of"):
        qualification_set_gold(qualification=qualification, by=alice, golds={999999: "x"})


def test_it_refuses_an_answer_that_starts_a_formula_once_normalised(
    qualification: Qualification, ann: Any
) -> None:
    answers = _answers(qualification, "\u205f@SUM(1) a dog barks while cars pass by")
    with pytest.raises(ValidationError, match="would run as a formula"):
        qualification_submit(qualification=qualification, worker=ann, answers=answers)
    assert not QualificationAttempt.objects.exists()
