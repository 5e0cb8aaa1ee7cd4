"""The assignment engine, one rule per test: publishing, claiming, submitting, returning,
reviewing and expiring, through annotation.services."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from annotation import tasks
from annotation.models import Assignment, Batch, Caption, Hit, HitClip
from annotation.services import (
    assignment_return,
    assignment_review,
    assignment_submit,
    assignments,
    assignments_expire,
    batch_move,
    hit_claim,
)
from annotation.signals import assignment_submitted
from core.models import Project, Role
from core.services import membership_add
from crowd.models import Block
from curation.models import Clip, Split
from curation.recipes import PRESETS
from curation.services import ontology_import, recipe_save, segments_import, subset_build
from tests.annotation.factories import (
    CAPTION,
    MakeBatch,
    captions_for,
    listened,
    make_clips,
    make_subset,
    publish,
)
from tests.conftest import FIXTURES, make_user


def _claim(worker: Any, **kwargs: Any) -> Assignment:
    assignment = hit_claim(worker=worker, **kwargs)
    assert assignment is not None
    return assignment


def _submit(assignment: Assignment, text: str = CAPTION) -> Assignment:
    listened(assignment)
    return assignment_submit(
        assignment=listened(assignment),
        worker=assignment.worker,
        captions=captions_for(assignment, text),
    )


def _annotator(project: Project, name: str) -> Any:
    user = make_user(name)
    membership_add(project=project, user=user, role=Role.ANNOTATOR)
    return user


def _error_text(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    return " ".join(exc.value.messages)


# Publishing ----------------------------------------------------------------------------


def test_it_publishes_one_hit_per_group_of_clips(make_batch: MakeBatch) -> None:
    batch = make_batch(clips=7, clips_per_hit=3, captions_per_clip=5)
    sizes = sorted(hit.hit_clips.count() for hit in batch.hits.all())
    assert sizes == [1, 3, 3]
    assert set(batch.hits.values_list("max_assignments", "taken")) == {(5, 0)}
    assert batch.state == Batch.State.PUBLISHED
    assert batch.published_at is not None
    assert batch.expires_at == batch.published_at + timedelta(days=7)


@pytest.mark.parametrize(("split", "wanted"), [(Split.TRAIN, 1), (Split.VAL, 5), (Split.TEST, 5)])
def test_it_asks_for_audiocaps_caption_counts_by_default(
    make_batch: MakeBatch, split: str, wanted: int
) -> None:
    batch = make_batch(split=split, captions_per_clip=None)
    assert batch.captions_per_clip == wanted


@pytest.mark.parametrize(("split", "wanted"), [(Split.TRAIN, 1), (Split.VAL, 5), (Split.TEST, 5)])
def test_batches_from_the_audiocaps_recipe_want_its_captions_per_clip(
    project: Project, split: str, wanted: int
) -> None:
    ontology_import(path=FIXTURES / "audioset_ontology.json")
    segments_import(path=FIXTURES / "segments" / "balanced_head.csv", segment_list="balanced")
    spec = {
        **PRESETS["audiocaps"].to_dict(),
        "segment_lists": ["balanced"],  # the fixture's list, too small for the paper's floor
        "min_clips_per_label": 1,
        "only_word_labels": False,
        "val_size": 3,
        "test_size": 3,
    }
    subset = subset_build(recipe=recipe_save(project=project, name="AudioCaps", spec=spec))
    Clip.objects.update(status=Clip.Status.READY, audio="clips/audio/fetched.wav")

    batch = publish(subset, split=split, captions_per_clip=None)

    assert batch.captions_per_clip == wanted
    assert set(batch.hits.values_list("max_assignments", flat=True)) == {wanted}


def test_a_batch_asks_what_its_subsets_recipe_says(project: Project) -> None:
    subset = make_subset(project, make_clips(2), Split.VAL)
    subset.spec = {**PRESETS["audiocaps"].to_dict(), "captions_per_val_clip": 3}
    subset.save(update_fields=["spec"])

    batch = publish(subset, split=Split.VAL, captions_per_clip=None)

    assert batch.captions_per_clip == 3


def test_it_publishes_only_the_chosen_split(project: Project) -> None:
    subset = make_subset(project, make_clips(2), Split.VAL)
    [train_clip] = make_clips(1)
    subset.subsetclip_set.create(clip=train_clip, split=Split.TRAIN)
    batch = publish(subset, split=Split.TRAIN)
    assert list(batch.hits.values_list("hit_clips__clip", flat=True)) == [train_clip.pk]


def test_it_refuses_to_publish_an_empty_split(project: Project) -> None:
    subset = make_subset(project, make_clips(2), Split.VAL)
    with pytest.raises(ValidationError, match="no fetched clips in its 'test' split"):
        publish(subset, split=Split.TEST)
    assert not Batch.objects.exists()


def test_it_publishes_only_fetched_clips(project: Project) -> None:
    clips = make_clips(3)
    Clip.objects.filter(pk=clips[0].pk).update(status=Clip.Status.PENDING, audio="")
    batch = publish(make_subset(project, clips, Split.VAL), clips_per_hit=1)

    published = set(HitClip.objects.filter(hit__batch=batch).values_list("clip_id", flat=True))
    assert published == {clips[1].pk, clips[2].pk}


def test_it_tells_to_fetch_a_split_with_no_fetched_clip(project: Project) -> None:
    clips = make_clips(2)
    Clip.objects.filter(pk__in=[c.pk for c in clips]).update(status=Clip.Status.PENDING, audio="")
    with pytest.raises(ValidationError, match="2 not fetched yet; fetch them first"):
        publish(make_subset(project, clips, Split.VAL))


def test_it_lets_only_researchers_publish(project: Project, rey: Any) -> None:
    subset = make_subset(project, make_clips(1))
    with pytest.raises(PermissionDenied):
        publish(subset, created_by=rey)


def test_it_refuses_nonsense_batch_numbers(project: Project) -> None:
    subset = make_subset(project, make_clips(1))
    with pytest.raises(ValidationError) as exc:
        publish(subset, clips_per_hit=0, time_allotted=timedelta(0), min_words=9, max_words=3)
    assert set(exc.value.message_dict) == {"clips_per_hit", "time_allotted", "min_words"}


def test_it_keeps_a_draft_unpublished(make_batch: MakeBatch, ann: Any) -> None:
    batch = make_batch(publish=False)
    assert batch.state == Batch.State.DRAFT
    assert hit_claim(worker=ann) is None


def test_it_refuses_reopening_a_finished_batch(batch: Batch, alice: Any) -> None:
    batch_move(batch=batch, state=Batch.State.FINISHED, user=alice)
    with pytest.raises(ValidationError, match="finished batch cannot become published"):
        batch_move(batch=batch, state=Batch.State.PUBLISHED, user=alice)


# Claiming ------------------------------------------------------------------------------


def test_it_gives_a_worker_a_hit_and_takes_a_slot(batch: Batch, ann: Any) -> None:
    now = timezone.now()
    assignment = _claim(ann, now=now)
    assert assignment.state == Assignment.State.ACCEPTED
    assert assignment.deadline == now + timedelta(minutes=30)
    assignment.hit.refresh_from_db()
    assert assignment.hit.taken == 1


def test_it_gives_back_the_current_assignment_instead_of_a_second(batch: Batch, ann: Any) -> None:
    first = _claim(ann)
    assert _claim(ann) == first
    assert Assignment.objects.filter(worker=ann).count() == 1


def test_it_refuses_two_open_assignments_for_one_worker_in_the_database(
    batch: Batch, ann: Any
) -> None:
    first = _claim(ann)
    other_hit = Hit.objects.exclude(pk=first.hit_id).first()
    assert other_hit is not None
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(hit=other_hit, worker=ann, deadline=first.deadline)


def test_it_never_gives_a_worker_a_clip_they_captioned_in_another_batch(
    project: Project, ann: Any
) -> None:
    clips = make_clips(1)
    first = publish(make_subset(project, clips))
    second = publish(make_subset(project, clips))
    _submit(_claim(ann, batch=first))
    assert hit_claim(worker=ann, batch=second) is None


def test_it_never_gives_a_worker_the_same_hit_twice(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=1, captions_per_clip=5)
    _submit(_claim(ann))
    assert hit_claim(worker=ann) is None


def test_it_never_fills_a_hit_over_its_captions(make_batch: MakeBatch, project: Project) -> None:
    make_batch(clips=1, captions_per_clip=2)
    workers = [_annotator(project, f"w{i}") for i in range(3)]
    claims = [hit_claim(worker=w) for w in workers]
    assert [c is not None for c in claims] == [True, True, False]
    assert Hit.objects.get().taken == 2


def test_it_makes_over_filling_impossible_in_the_database(batch: Batch) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Hit.objects.update(taken=F("max_assignments") + 1)


def test_it_makes_a_negative_slot_count_impossible_in_the_database(batch: Batch) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Hit.objects.update(taken=-1)


def test_it_serves_the_highest_priority_first(batch: Batch, ann: Any) -> None:
    urgent = batch.hits.order_by("id").last()
    assert urgent is not None
    Hit.objects.filter(pk=urgent.pk).update(priority=2.5)
    assert _claim(ann).hit == urgent


def test_it_serves_older_hits_first_among_equal_priorities(batch: Batch, ann: Any) -> None:
    assert _claim(ann).hit == batch.hits.order_by("id").first()


def test_it_skips_full_hits(batch: Batch, ann: Any) -> None:
    first = batch.hits.order_by("id").first()
    assert first is not None
    Hit.objects.filter(pk=first.pk).update(taken=F("max_assignments"))
    assert _claim(ann).hit != first


def test_it_only_serves_the_asked_batch(make_batch: MakeBatch, ann: Any) -> None:
    make_batch()
    wanted = make_batch()
    assert _claim(ann, batch=wanted).hit.batch == wanted


def test_it_gives_nothing_from_a_paused_batch(batch: Batch, alice: Any, ann: Any) -> None:
    batch_move(batch=batch, state=Batch.State.PAUSED, user=alice)
    assert hit_claim(worker=ann) is None


def test_it_gives_nothing_from_a_finished_batch(batch: Batch, alice: Any, ann: Any) -> None:
    batch_move(batch=batch, state=Batch.State.FINISHED, user=alice)
    assert hit_claim(worker=ann) is None


def test_it_gives_nothing_once_the_batch_lifetime_ends(batch: Batch, ann: Any) -> None:
    assert batch.expires_at is not None
    assert hit_claim(worker=ann, now=batch.expires_at + timedelta(seconds=1)) is None


@pytest.mark.parametrize("persona", ["alice", "rey", "olive"])
def test_it_gives_nothing_to_someone_who_does_not_annotate_the_project(
    batch: Batch, persona: str, request: pytest.FixtureRequest
) -> None:
    assert hit_claim(worker=request.getfixturevalue(persona)) is None


# Releasing slots -----------------------------------------------------------------------


def test_it_reopens_the_slot_when_a_worker_returns_the_hit(batch: Batch, ann: Any) -> None:
    assignment = assignment_return(assignment=_claim(ann), worker=ann)
    assert assignment.state == Assignment.State.RETURNED
    assignment.hit.refresh_from_db()
    assert assignment.hit.taken == 0


def test_it_lets_a_worker_take_a_returned_hit_again(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=1)
    returned = assignment_return(assignment=_claim(ann), worker=ann)
    assert _claim(ann).hit == returned.hit


def test_it_refuses_returning_a_submitted_hit(batch: Batch, ann: Any) -> None:
    assignment = _submit(_claim(ann))
    with pytest.raises(ValidationError, match="submitted; it cannot become returned"):
        assignment_return(assignment=assignment, worker=ann)


def test_it_lets_only_the_holder_return_a_hit(batch: Batch, ann: Any, abe: Any) -> None:
    with pytest.raises(PermissionDenied):
        assignment_return(assignment=_claim(ann), worker=abe)


def test_it_expires_assignments_past_their_deadline(batch: Batch, ann: Any) -> None:
    assignment = _claim(ann)
    assert assignments_expire(now=assignment.deadline) == 1
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.EXPIRED
    assignment.hit.refresh_from_db()
    assert assignment.hit.taken == 0


def test_it_leaves_assignments_within_their_time_alone(batch: Batch, ann: Any) -> None:
    assignment = _claim(ann)
    assert assignments_expire(now=assignment.deadline - timedelta(seconds=1)) == 0
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.ACCEPTED


def test_it_gives_an_expired_slot_to_the_next_worker(
    make_batch: MakeBatch, project: Project, ann: Any, abe: Any
) -> None:
    make_batch(clips=1, captions_per_clip=1)
    late = _claim(ann)
    assert hit_claim(worker=abe) is None
    assignments_expire(now=late.deadline)
    assert _claim(abe, now=late.deadline).hit == late.hit


def test_it_expires_a_late_assignment_when_its_worker_claims_again(batch: Batch, ann: Any) -> None:
    late = _claim(ann)
    fresh = _claim(ann, now=late.deadline + timedelta(seconds=1))
    late.refresh_from_db()
    assert late.state == Assignment.State.EXPIRED
    assert fresh != late
    assert sum(Hit.objects.values_list("taken", flat=True)) == 1


def test_it_expires_through_the_periodic_task(batch: Batch, ann: Any) -> None:
    assignment = _claim(ann)
    Assignment.objects.filter(pk=assignment.pk).update(
        accepted_at=F("accepted_at") - timedelta(hours=1), deadline=timezone.now()
    )
    assert tasks.assignments_expire() == 1


def test_it_schedules_the_expiry_task_every_minute() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["assignments-expire"]
    assert (entry["task"], entry["schedule"]) == ("annotation.tasks.assignments_expire", 60.0)


def test_it_expires_through_the_command(batch: Batch, ann: Any) -> None:
    assignment = _claim(ann)
    Assignment.objects.filter(pk=assignment.pk).update(
        accepted_at=F("accepted_at") - timedelta(hours=1), deadline=timezone.now()
    )
    out = StringIO()
    call_command("expire_assignments", stdout=out)
    assert out.getvalue().strip() == "1 assignment expired."


# Reviewing -----------------------------------------------------------------------------


def test_it_reopens_the_slot_when_a_caption_is_rejected(batch: Batch, ann: Any, rey: Any) -> None:
    assignment = assignment_review(
        assignment=_submit(_claim(ann)), reviewer=rey, approve=False, feedback="Not English."
    )
    assert assignment.state == Assignment.State.REJECTED
    assert assignment.feedback == "Not English."
    assignment.hit.refresh_from_db()
    assert assignment.hit.taken == 0


def test_it_keeps_the_slot_when_a_caption_is_approved(batch: Batch, ann: Any, rey: Any) -> None:
    assignment = assignment_review(assignment=_submit(_claim(ann)), reviewer=rey, approve=True)
    assert assignment.state == Assignment.State.APPROVED
    assignment.hit.refresh_from_db()
    assert assignment.hit.taken == 1


def test_it_keeps_a_rejected_worker_off_those_clips(
    make_batch: MakeBatch, ann: Any, rey: Any
) -> None:
    make_batch(clips=1)
    assignment_review(assignment=_submit(_claim(ann)), reviewer=rey, approve=False)
    assert hit_claim(worker=ann) is None


def test_it_gives_a_rejected_slot_to_another_worker(
    make_batch: MakeBatch, ann: Any, abe: Any, rey: Any
) -> None:
    make_batch(clips=1, captions_per_clip=1)
    rejected = assignment_review(assignment=_submit(_claim(ann)), reviewer=rey, approve=False)
    assert _claim(abe).hit == rejected.hit


def test_it_lets_only_reviewers_and_researchers_review(batch: Batch, ann: Any, abe: Any) -> None:
    assignment = _submit(_claim(ann))
    with pytest.raises(PermissionDenied):
        assignment_review(assignment=assignment, reviewer=abe, approve=True)


def test_it_refuses_reviewing_an_unsubmitted_assignment(batch: Batch, ann: Any, rey: Any) -> None:
    with pytest.raises(ValidationError, match="accepted; it cannot become approved"):
        assignment_review(assignment=_claim(ann), reviewer=rey, approve=True)


def test_it_refuses_reviewing_twice(batch: Batch, ann: Any, rey: Any) -> None:
    assignment = assignment_review(assignment=_submit(_claim(ann)), reviewer=rey, approve=True)
    with pytest.raises(ValidationError, match="approved; it cannot become rejected"):
        assignment_review(assignment=assignment, reviewer=rey, approve=False)
    assignment.hit.refresh_from_db()
    assert assignment.hit.taken == 1


# Submitting ----------------------------------------------------------------------------


def test_it_stores_one_caption_per_clip_and_marks_the_assignment_submitted(
    make_batch: MakeBatch, ann: Any
) -> None:
    make_batch(clips=3, clips_per_hit=3)
    assignment = _submit(_claim(ann))
    assert assignment.state == Assignment.State.SUBMITTED
    assert assignment.submitted_at is not None
    assert list(assignment.captions.values_list("text", flat=True)) == [CAPTION] * 3


def test_it_keeps_the_slot_taken_after_submitting(batch: Batch, ann: Any) -> None:
    assignment = _submit(_claim(ann))
    assignment.hit.refresh_from_db()
    assert assignment.hit.taken == 1


def test_it_lets_only_the_holder_submit(batch: Batch, ann: Any, abe: Any) -> None:
    assignment = _claim(ann)
    with pytest.raises(PermissionDenied):
        assignment_submit(
            assignment=listened(assignment), worker=abe, captions=captions_for(assignment)
        )
    assert not Caption.objects.exists()


def test_it_refuses_submitting_twice(batch: Batch, ann: Any) -> None:
    assignment = _submit(_claim(ann))
    with pytest.raises(ValidationError, match="already submitted"):
        _submit(assignment, "another dog barks at the door")
    assert Caption.objects.count() == 1


def test_a_repeated_submit_returns_the_stored_assignment_and_writes_nothing(
    batch: Batch, ann: Any
) -> None:
    first = _submit(_claim(ann))
    heard: list[int] = []

    def record(*, assignment: Assignment, **kwargs: Any) -> None:
        heard.append(assignment.pk)

    assignment_submitted.connect(record)
    try:
        # the same captions as a browser resends them: the submit trims them again
        again = _submit(first, f"  {CAPTION} ")
    finally:
        assignment_submitted.disconnect(record)
    assert (again.pk, again.state, again.submitted_at) == (
        first.pk,
        Assignment.State.SUBMITTED,
        first.submitted_at,
    )
    assert list(Caption.objects.values_list("text", flat=True)) == [CAPTION]
    assert heard == []  # nothing told the other apps about a second submit


def _changed_after_the_read(
    monkeypatch: pytest.MonkeyPatch, change: Callable[[Assignment], object]
) -> None:
    """`change` runs once, between the submit's read and its write (PostgreSQL's
    one-statement submit checks the captions in between)."""
    if connection.vendor != "postgresql":
        pytest.skip("the submit reads, then writes, in two statements on PostgreSQL only")
    check = assignments._captions_checked
    done: list[bool] = []

    def checked_then_changed(assignment: Assignment, *args: Any) -> dict[int, str]:
        texts = check(assignment, *args)
        if not done:
            done.append(True)
            change(assignment)
        return texts

    monkeypatch.setattr(assignments, "_captions_checked", checked_then_changed)


def test_a_submit_stores_nothing_when_the_hit_was_returned_after_its_read(
    batch: Batch, ann: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assignment = _claim(ann)
    _changed_after_the_read(
        monkeypatch,
        lambda a: assignment_return(assignment=Assignment.objects.get(pk=a.pk), worker=ann),
    )
    with pytest.raises(ValidationError, match="already returned"):
        _submit(assignment)
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.RETURNED
    assert not Caption.objects.exists()


def test_a_submit_stores_nothing_when_the_worker_was_blocked_after_its_read(
    batch: Batch, ann: Any, alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assignment = _claim(ann)
    _changed_after_the_read(
        monkeypatch,
        lambda a: Block.objects.create(
            project=batch.project, worker=ann, reason="spam", blocked_by=alice
        ),
    )
    with pytest.raises(ValidationError, match="blocked from this project"):
        _submit(assignment)
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.RETURNED
    assert not Caption.objects.exists()


def test_a_submit_stores_nothing_when_the_time_ran_out_after_its_read(
    batch: Batch, ann: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assignment = _claim(ann)
    _changed_after_the_read(
        monkeypatch,
        lambda a: Assignment.objects.filter(pk=a.pk).update(
            deadline=F("accepted_at") + timedelta(microseconds=1)
        ),
    )
    with pytest.raises(ValidationError, match="time allotted for this HIT ran out"):
        _submit(assignment)
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.EXPIRED
    assert not Caption.objects.exists()


def test_it_refuses_a_late_submission_and_expires_the_assignment(batch: Batch, ann: Any) -> None:
    assignment = _claim(ann)
    with pytest.raises(ValidationError, match="time allotted for this HIT ran out"):
        assignment_submit(
            assignment=listened(assignment),
            worker=ann,
            captions=captions_for(assignment),
            now=assignment.deadline,
        )
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.EXPIRED
    assert not Caption.objects.exists()


def test_it_requires_a_caption_for_every_clip(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(clips=2, clips_per_hit=2)
    assignment = listened(_claim(ann))
    first, second = assignment.hit.hit_clips.order_by("position").values_list("clip_id", flat=True)
    with pytest.raises(ValidationError) as exc:
        assignment_submit(assignment=listened(assignment), worker=ann, captions={first: CAPTION})
    assert exc.value.message_dict == {f"caption-{second}": ["The caption for clip 2 is empty."]}
    assert not Caption.objects.exists()


def test_it_refuses_captions_for_clips_outside_the_hit(batch: Batch, ann: Any) -> None:
    assignment = listened(_claim(ann))
    stranger = make_clips(1)[0]
    captions = {**captions_for(assignment), stranger.pk: CAPTION}
    with pytest.raises(ValidationError, match=f"Clips \\[{stranger.pk}\\] are not part"):
        assignment_submit(assignment=listened(assignment), worker=ann, captions=captions)


def test_it_trims_surrounding_whitespace(batch: Batch, ann: Any) -> None:
    assignment = _submit(_claim(ann), f"  \t{CAPTION}\n ")
    assert assignment.captions.get().text == CAPTION


def test_it_refuses_html(batch: Batch, ann: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        _submit(_claim(ann), "a dog <b>barks</b> loudly")
    assert _error_text(exc) == (
        "The caption for clip 1 contains “<”; captions are plain text, so please leave out < and >."
    )
    assert not Caption.objects.exists()


def test_it_stores_ordinary_unicode(batch: Batch, ann: Any) -> None:
    text = "un perro ladra, 狗在叫, 🐕 barks — naïve café"
    assert _submit(_claim(ann), text).captions.get().text == text


def test_it_refuses_a_100_kb_caption_with_a_message(batch: Batch, ann: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        _submit(_claim(ann), "dog " * 25_600)
    assert (
        _error_text(exc) == "The caption for clip 1 is 102,399 characters long; the limit is 500."
    )


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\x85"])
def test_it_refuses_control_characters(batch: Batch, ann: Any, char: str) -> None:
    with pytest.raises(ValidationError) as exc:
        _submit(_claim(ann), f"a dog{char} barks loudly")
    assert f"control character (U+{ord(char):04X})" in _error_text(exc)


@pytest.mark.parametrize("char", ["\u202a", "\u202b", "\u202d", "\u202e", "\u2066", "\u2069"])
def test_it_refuses_text_direction_overrides(batch: Batch, ann: Any, char: str) -> None:
    with pytest.raises(ValidationError) as exc:
        _submit(_claim(ann), f"a dog {char}skrab loudly")
    assert f"text-direction control character (U+{ord(char):04X})" in _error_text(exc)


@pytest.mark.parametrize(
    "text",
    [
        "=HYPERLINK(A1) a dog barks loudly",
        "+1+1 a dog barks loudly",
        "-1+1 a dog barks loudly",
        "@SUM(A1) a dog barks loudly",
        "\t=1+1 a dog barks loudly",
        "\r\n=1+1 a dog barks loudly",
        "\u00a0=1+1 a dog barks loudly",
    ],
)
def test_it_refuses_a_caption_a_spreadsheet_would_run_as_a_formula(
    batch: Batch, ann: Any, text: str
) -> None:
    with pytest.raises(ValidationError) as exc:
        _submit(_claim(ann), text)
    assert "which a spreadsheet opening the exported captions would run as a formula" in (
        _error_text(exc)
    )
    assert not Caption.objects.exists()


def test_it_stores_formula_characters_inside_a_caption(batch: Batch, ann: Any) -> None:
    text = "a dog barks loudly = cars + wind - rain @ night"
    assert _submit(_claim(ann), text).captions.get().text == text


def test_it_refuses_captions_below_the_minimum_words(batch: Batch, ann: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        _submit(_claim(ann), "dog barks")
    assert _error_text(exc) == "The caption for clip 1 has 2 words; write at least 3."


def test_it_refuses_captions_over_the_maximum_words(make_batch: MakeBatch, ann: Any) -> None:
    make_batch(max_words=5)
    with pytest.raises(ValidationError) as exc:
        _submit(_claim(ann), "a dog barks and a car passes")
    assert _error_text(exc) == "The caption for clip 1 has 7 words; the limit is 5."


# Command -------------------------------------------------------------------------------


def test_it_publishes_through_the_command(project: Project) -> None:
    subset = make_subset(project, make_clips(4))
    out = StringIO()
    call_command(
        "publish_batch", "--subset", subset.slug, "--split", "val", "--clips-per-hit", "2",
        stdout=out,
    )  # fmt: skip
    batch = Batch.objects.get()
    assert (batch.state, batch.captions_per_clip, batch.hits.count()) == ("published", 5, 2)
    assert "2 HITs, 5 captions per clip" in out.getvalue()


def test_it_reports_an_unknown_subset_from_the_command(db: None) -> None:
    with pytest.raises(CommandError, match="No subset with slug 'nope'"):
        call_command("publish_batch", "--subset", "nope", "--split", "val")
