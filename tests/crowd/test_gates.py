"""What hit_claim offers: blocks and batch requirements (qualifications, approval rate,
approved count, locales) narrow the claim query itself, and the worker is told why."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment, Batch
from annotation.services import assignment_review, assignment_submit, hit_claim
from core.models import Project, Role
from core.services import membership_add, profile_country_set
from crowd.models import Block, Qualification, RequiredLocale
from crowd.queries import blocked_everywhere, requirements_refusals, requirements_unmet
from crowd.services import (
    batch_requirements_set,
    qualification_create,
    qualification_grade,
    qualification_submit,
    worker_block,
    worker_unblock,
)
from tests.annotation.factories import captions_for, listened, make_clips, make_subset
from tests.crowd.conftest import MakeBatch, Submit


def _pass(qualification: Qualification, worker: Any, reviewer: Any) -> None:
    answers = {
        clip_id: "a dog barks while cars pass by"
        for clip_id in qualification.items.values_list("clip_id", flat=True)
    }
    attempt = qualification_submit(qualification=qualification, worker=worker, answers=answers)
    qualification_grade(attempt=attempt, reviewer=reviewer, approve=True)


def _record(
    worker: Any,
    reviewer: Any,
    make_batch: MakeBatch,
    submit: Submit,
    *,
    approved: int,
    rejected: int,
) -> None:
    """Gives the worker a reviewed history in a batch of its own."""
    history = make_batch(clips=approved + rejected, captions_per_clip=1)
    for n in range(approved + rejected):
        assignment = submit(worker, batch=history)
        assignment_review(
            assignment=assignment,
            reviewer=reviewer,
            approve=n < approved,
            reason="" if n < approved else "off_topic",
        )


# Blocks --------------------------------------------------------------------------------


def test_it_gives_a_blocked_worker_no_more_hits(batch: Batch, ann: Any, rey: Any) -> None:
    worker_block(project=batch.project, worker=ann, by=rey, reason="Copies the hints.")
    assert hit_claim(worker=ann) is None


def test_it_offers_hits_again_once_unblocked(batch: Batch, ann: Any, rey: Any) -> None:
    worker_block(project=batch.project, worker=ann, by=rey, reason="Copies the hints.")
    worker_unblock(project=batch.project, worker=ann, by=rey, reason="Talked it through.")
    assert hit_claim(worker=ann) is not None
    block = Block.objects.get()
    assert block.lifted_by == rey
    assert block.lift_reason == "Talked it through."


def test_it_blocks_only_on_the_blocking_project(
    project: Project, make_batch: MakeBatch, ann: Any, rey: Any, olive: Any
) -> None:
    birds = Project.objects.get(slug="birds")
    membership_add(project=birds, user=ann, role=Role.ANNOTATOR)
    make_batch(project=project)
    elsewhere = make_batch(project=birds, created_by=olive)
    worker_block(project=project, worker=ann, by=rey, reason="Off-topic captions.")

    assignment = hit_claim(worker=ann)

    assert assignment is not None
    assert assignment.hit.batch == elsewhere
    assert not blocked_everywhere(worker=ann)


def test_it_keeps_other_workers_working(batch: Batch, ann: Any, abe: Any, rey: Any) -> None:
    worker_block(project=batch.project, worker=ann, by=rey, reason="Copies the hints.")
    assert hit_claim(worker=abe) is not None


def test_a_block_stops_the_hit_already_held(batch: Batch, ann: Any, rey: Any) -> None:
    assignment = hit_claim(worker=ann)
    assert assignment is not None
    worker_block(project=batch.project, worker=ann, by=rey, reason="Copies the hints.")
    with pytest.raises(ValidationError, match="blocked from this project's HITs"):
        assignment_submit(
            assignment=listened(assignment), worker=ann, captions=captions_for(assignment)
        )
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.RETURNED
    assert not assignment.captions.exists()
    # once the block is lifted, the worker's next HIT goes through
    worker_unblock(project=batch.project, worker=ann, by=rey)
    again = hit_claim(worker=ann)
    assert again is not None
    assignment_submit(assignment=listened(again), worker=ann, captions=captions_for(again))


def test_it_needs_a_reason_to_block(batch: Batch, ann: Any, rey: Any) -> None:
    with pytest.raises(ValidationError, match="Say why"):
        worker_block(project=batch.project, worker=ann, by=rey, reason="  ")
    assert not Block.objects.exists()


def test_it_refuses_to_block_twice(batch: Batch, ann: Any, rey: Any) -> None:
    worker_block(project=batch.project, worker=ann, by=rey, reason="Once.")
    with pytest.raises(ValidationError, match="already blocked"):
        worker_block(project=batch.project, worker=ann, by=rey, reason="Twice.")
    assert Block.objects.count() == 1


def test_it_blocks_only_workers_of_the_project(batch: Batch, olive: Any, rey: Any) -> None:
    with pytest.raises(ValidationError, match="not a worker"):
        worker_block(project=batch.project, worker=olive, by=rey, reason="Not ours.")


@pytest.mark.parametrize("persona", ["ann", "rex"])
def test_it_lets_only_reviewers_of_the_project_block(
    batch: Batch, abe: Any, request: pytest.FixtureRequest, persona: str
) -> None:
    with pytest.raises(PermissionDenied):
        worker_block(
            project=batch.project, worker=abe, by=request.getfixturevalue(persona), reason="x"
        )
    assert not Block.objects.exists()


def test_it_keeps_a_blocked_workers_current_hit(batch: Batch, ann: Any, rey: Any) -> None:
    current = hit_claim(worker=ann)
    worker_block(project=batch.project, worker=ann, by=rey, reason="Copies the hints.")
    assert hit_claim(worker=ann) == current  # finishing it is allowed; no new one after


# Requirements --------------------------------------------------------------------------


def test_it_skips_batches_needing_a_qualification_the_worker_lacks(
    make_batch: MakeBatch, qualification: Qualification, ann: Any, alice: Any
) -> None:
    gated = make_batch()
    batch_requirements_set(
        batch=gated,
        by=alice,
        qualifications=[qualification],
        min_approval_percent=0,
        min_approved=0,
    )
    assert hit_claim(worker=ann) is None


def test_it_offers_the_batch_once_the_qualification_is_passed(
    make_batch: MakeBatch, qualification: Qualification, ann: Any, alice: Any, rey: Any
) -> None:
    gated = make_batch()
    batch_requirements_set(
        batch=gated,
        by=alice,
        qualifications=[qualification],
        min_approval_percent=0,
        min_approved=0,
    )
    _pass(qualification, ann, rey)
    assignment = hit_claim(worker=ann)
    assert assignment is not None
    assert assignment.hit.batch == gated


def test_it_does_not_count_an_attempt_waiting_for_review(
    make_batch: MakeBatch, qualification: Qualification, ann: Any, alice: Any
) -> None:
    gated = make_batch()
    batch_requirements_set(
        batch=gated,
        by=alice,
        qualifications=[qualification],
        min_approval_percent=0,
        min_approved=0,
    )
    answers = dict.fromkeys(
        qualification.items.values_list("clip_id", flat=True), "a dog barks loudly"
    )
    qualification_submit(qualification=qualification, worker=ann, answers=answers)
    assert hit_claim(worker=ann) is None


def test_it_needs_every_required_qualification(
    project: Project,
    make_batch: MakeBatch,
    qualification: Qualification,
    ann: Any,
    alice: Any,
    rey: Any,
) -> None:
    subset = make_subset(project, make_clips(1))
    second = qualification_create(
        project=project,
        created_by=alice,
        name="Second test",
        clip_ids=str(subset.clips.get().pk),
    )
    gated = make_batch()
    batch_requirements_set(
        batch=gated,
        by=alice,
        qualifications=[qualification, second],
        min_approval_percent=0,
        min_approved=0,
    )
    _pass(qualification, ann, rey)
    assert hit_claim(worker=ann) is None
    _pass(second, ann, rey)
    assert hit_claim(worker=ann) is not None


def test_it_still_offers_ungated_batches(
    make_batch: MakeBatch, qualification: Qualification, ann: Any, alice: Any
) -> None:
    gated = make_batch()
    open_batch = make_batch()
    batch_requirements_set(
        batch=gated,
        by=alice,
        qualifications=[qualification],
        min_approval_percent=0,
        min_approved=0,
    )
    assignment = hit_claim(worker=ann)
    assert assignment is not None
    assert assignment.hit.batch == open_batch


def test_it_gates_on_the_approved_count(
    make_batch: MakeBatch, submit: Submit, ann: Any, alice: Any, rey: Any
) -> None:
    _record(ann, rey, make_batch, submit, approved=2, rejected=0)
    gated = make_batch()
    batch_requirements_set(
        batch=gated, by=alice, qualifications=[], min_approval_percent=0, min_approved=3
    )
    assert hit_claim(worker=ann, batch=gated) is None
    batch_requirements_set(
        batch=gated, by=alice, qualifications=[], min_approval_percent=0, min_approved=2
    )
    assert hit_claim(worker=ann, batch=gated) is not None


def test_it_gates_on_the_approval_rate(
    make_batch: MakeBatch, submit: Submit, ann: Any, abe: Any, alice: Any, rey: Any
) -> None:
    _record(ann, rey, make_batch, submit, approved=19, rejected=1)  # 95 %
    _record(abe, rey, make_batch, submit, approved=18, rejected=2)  # 90 %
    gated = make_batch()
    batch_requirements_set(
        batch=gated, by=alice, qualifications=[], min_approval_percent=95, min_approved=0
    )
    assert hit_claim(worker=ann, batch=gated) is not None
    assert hit_claim(worker=abe, batch=gated) is None


def test_it_counts_a_new_worker_as_fully_approved(
    make_batch: MakeBatch, ann: Any, alice: Any
) -> None:
    gated = make_batch()
    batch_requirements_set(
        batch=gated, by=alice, qualifications=[], min_approval_percent=95, min_approved=0
    )
    assert hit_claim(worker=ann) is not None


def test_it_lists_the_requirements_a_worker_misses(
    make_batch: MakeBatch, qualification: Qualification, ann: Any, alice: Any
) -> None:
    gated = make_batch()
    batch_requirements_set(
        batch=gated,
        by=alice,
        qualifications=[qualification],
        min_approval_percent=0,
        min_approved=0,
    )
    assert [r.batch for r in requirements_unmet(worker=ann)] == [gated]


def test_it_filters_in_the_claim_query_whatever_the_number_of_batches(
    make_batch: MakeBatch, qualification: Qualification, ann: Any, alice: Any
) -> None:
    """The gate adds no query per HIT or batch: claiming is as many queries with 1 gated
    batch as with 6."""

    def claim_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert hit_claim(worker=ann) is None
        return len(queries)

    def gate(batch: Batch) -> None:
        batch_requirements_set(
            batch=batch,
            by=alice,
            qualifications=[qualification],
            min_approval_percent=90,
            min_approved=5,
        )

    gate(make_batch(clips=2))
    few = claim_queries()
    for _ in range(5):
        gate(make_batch(clips=4))
    assert claim_queries() == few


def test_it_refuses_a_qualification_of_another_project(
    batch: Batch, olive: Any, alice: Any
) -> None:
    birds = Project.objects.get(slug="birds")
    subset = make_subset(birds, make_clips(1))
    foreign = qualification_create(
        project=birds, created_by=olive, name="Birds test", clip_ids=str(subset.clips.get().pk)
    )
    with pytest.raises(ValidationError, match="belong to another project"):
        batch_requirements_set(
            batch=batch,
            by=alice,
            qualifications=[foreign],
            min_approval_percent=0,
            min_approved=0,
        )


@pytest.mark.parametrize("persona", ["rey", "ann", "olive"])
def test_it_lets_only_researchers_set_requirements(
    batch: Batch, request: pytest.FixtureRequest, persona: str
) -> None:
    with pytest.raises(PermissionDenied):
        batch_requirements_set(
            batch=batch,
            by=request.getfixturevalue(persona),
            qualifications=[],
            min_approval_percent=99,
            min_approved=0,
        )


# Whose record gates: this project's by default, every project's on request --------------


@pytest.fixture
def birds(project: Project, ann: Any, olive: Any) -> Project:
    """Olive's project, where Ann annotates too."""
    birds = Project.objects.get(slug="birds")
    membership_add(project=birds, user=ann, role=Role.ANNOTATOR)
    return birds


def _record_in(
    birds: Project, worker: Any, reviewer: Any, make_batch: MakeBatch, submit: Submit, **counts: int
) -> None:
    history = make_batch(project=birds, clips=sum(counts.values()), captions_per_clip=1)
    for n in range(sum(counts.values())):
        approve = n < counts["approved"]
        assignment_review(
            assignment=submit(worker, batch=history),
            reviewer=reviewer,
            approve=approve,
            reason="" if approve else "off_topic",
        )


def test_another_projects_rejections_do_not_lock_a_worker_out_here(
    birds: Project, make_batch: MakeBatch, submit: Submit, ann: Any, alice: Any, olive: Any
) -> None:
    _record_in(birds, ann, olive, make_batch, submit, approved=0, rejected=3)
    gated = make_batch()
    batch_requirements_set(
        batch=gated, by=alice, qualifications=[], min_approval_percent=95, min_approved=0
    )

    assert hit_claim(worker=ann, batch=gated) is not None


def test_another_projects_approvals_do_not_count_here(
    birds: Project, make_batch: MakeBatch, submit: Submit, ann: Any, alice: Any, olive: Any
) -> None:
    _record_in(birds, ann, olive, make_batch, submit, approved=3, rejected=0)
    gated = make_batch()
    batch_requirements_set(
        batch=gated, by=alice, qualifications=[], min_approval_percent=0, min_approved=3
    )

    assert hit_claim(worker=ann, batch=gated) is None


def test_a_batch_may_ask_for_the_site_wide_record(
    birds: Project, make_batch: MakeBatch, submit: Submit, ann: Any, alice: Any, olive: Any
) -> None:
    _record_in(birds, ann, olive, make_batch, submit, approved=0, rejected=3)
    gated = make_batch()
    batch_requirements_set(
        batch=gated,
        by=alice,
        qualifications=[],
        min_approval_percent=95,
        min_approved=0,
        site_wide_record=True,
    )

    assert hit_claim(worker=ann, batch=gated) is None
    assert [r.batch for r in requirements_unmet(worker=ann)] == [gated]


# Locales: the country a worker declared ---------------------------------------------------


def _locales(batch: Batch, alice: Any, *codes: str, **record: int) -> None:
    batch_requirements_set(
        batch=batch,
        by=alice,
        qualifications=[],
        min_approval_percent=record.get("percent", 0),
        min_approved=record.get("approved", 0),
        locales=codes,
    )


def test_it_offers_a_localed_batch_to_a_worker_who_declared_one_of_its_countries(
    batch: Batch, ann: Any, alice: Any
) -> None:
    profile_country_set(user=ann, country="NZ")
    _locales(batch, alice, "AU", "NZ")
    assert hit_claim(worker=ann) is not None


def test_it_refuses_a_worker_from_another_country(batch: Batch, ann: Any, alice: Any) -> None:
    profile_country_set(user=ann, country="DE")
    _locales(batch, alice, "AU", "NZ")
    assert hit_claim(worker=ann) is None
    assert requirements_refusals(worker=ann) == [
        f"{batch.name} (Everyday sounds): it is open only to workers in Australia or "
        "New Zealand, and your account says Germany."
    ]


def test_it_refuses_a_worker_who_declared_no_country(batch: Batch, ann: Any, alice: Any) -> None:
    _locales(batch, alice, "US")
    assert hit_claim(worker=ann) is None
    [refusal] = requirements_refusals(worker=ann)
    assert "your account names no country" in refusal


def test_a_batch_without_locales_takes_any_country(batch: Batch, ann: Any, alice: Any) -> None:
    profile_country_set(user=ann, country="DE")
    _locales(batch, alice, percent=90)
    assert hit_claim(worker=ann) is not None


def test_it_reads_the_country_at_each_claim(batch: Batch, ann: Any, alice: Any) -> None:
    """The claim query is compiled once per process with a stand-in for the worker: the
    country must come from the worker's row, not from the first worker who claimed."""
    profile_country_set(user=ann, country="DE")
    _locales(batch, alice, "GB")
    assert hit_claim(worker=ann) is None
    profile_country_set(user=ann, country="GB")
    assert hit_claim(worker=ann) is not None


def test_it_says_which_approval_figure_a_worker_misses(
    make_batch: MakeBatch, submit: Submit, ann: Any, alice: Any, rey: Any
) -> None:
    _record(ann, rey, make_batch, submit, approved=1, rejected=1)
    profile_country_set(user=ann, country="GB")
    gated = make_batch(name="Gated")
    _locales(gated, alice, "GB", percent=95, approved=3)
    assert hit_claim(worker=ann, batch=gated) is None
    assert requirements_refusals(worker=ann, batch=gated) == [
        "Gated (Everyday sounds): it needs at least 95 % of your reviewed HITs approved in "
        "this project; yours: 50.0 %; it needs at least 3 approved HITs in this project; "
        "you have 1."
    ]


def test_it_refuses_codes_outside_iso_3166(batch: Batch, alice: Any) -> None:
    with pytest.raises(ValidationError, match="XX, ZZ: not ISO 3166 country codes"):
        _locales(batch, alice, "GB", "zz", "XX")
    assert not RequiredLocale.objects.exists()


def test_it_replaces_the_locales(batch: Batch, alice: Any) -> None:
    _locales(batch, alice, "GB", "us")
    _locales(batch, alice, "US", "CA")
    assert sorted(RequiredLocale.objects.values_list("country", flat=True)) == ["CA", "US"]
