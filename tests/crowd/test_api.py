"""The review API (crowd.api): the queue of submitted work, one assignment, and approve,
reject with a reason and fix.

Access is the pages': a project you are not in is a 404 (a reviewer of another project
too), annotators get 403, researchers and reviewers read and review.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from annotation.models import Assignment, Caption, Hit
from annotation.services import assignment_submit, hit_claim
from core.models import Project
from crowd.models import REASON_FEEDBACK, LedgerEntry, RejectReason
from tests.annotation.factories import captions_for, listened
from tests.conftest import login
from tests.crowd.conftest import MakeBatch

JSON = "application/json"
P = "/api/projects/sounds"


@dataclass
class World:
    project: Project
    submitted: Assignment  # Abe's, on a batch of two clips, one per HIT, two captions each


@pytest.fixture
def world(project: Project, make_batch: MakeBatch, abe: Any) -> World:
    make_batch(clips=2, captions_per_clip=2)
    submitted = hit_claim(worker=abe)
    assert submitted is not None
    assignment_submit(
        assignment=listened(submitted),
        worker=abe,
        captions=captions_for(submitted, "abe hears a dog bark"),
    )
    return World(project=project, submitted=submitted)


def _post(client: Client, url: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(url, json.dumps(body or {}), content_type=JSON)


def _state() -> tuple[Any, ...]:
    return (
        sorted(Assignment.objects.values_list("pk", "state")),
        sorted(Caption.objects.values_list("pk", "text", "fixed_text")),
        sorted(Hit.objects.values_list("pk", "taken")),
        LedgerEntry.objects.count(),
    )


URL = Callable[[World], str]
READS: dict[str, URL] = {
    "review queue": lambda w: f"{P}/review",
    "assignment": lambda w: f"{P}/assignments/{w.submitted.pk}",
}
REVIEWS: dict[str, tuple[URL, Callable[[World], dict[str, Any]]]] = {
    "approve": (lambda w: f"{P}/assignments/{w.submitted.pk}/approve", lambda w: {}),
    "reject": (
        lambda w: f"{P}/assignments/{w.submitted.pk}/reject",
        lambda w: {"reason": RejectReason.OFF_TOPIC},
    ),
    "fix": (
        lambda w: f"{P}/assignments/{w.submitted.pk}/fix",
        lambda w: {"fixes": {str(w.submitted.captions.get().pk): "a dog barks twice nearby"}},
    ),
}


def _review(client: Client, name: str, w: World) -> Any:
    url, body = REVIEWS[name]
    return _post(client, url(w), body(w))


# Access ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(READS))
def test_it_answers_anonymous_reads_with_401(world: World, name: str) -> None:
    assert Client().get(READS[name](world)).status_code == 401


@pytest.mark.parametrize("name", list(REVIEWS))
def test_it_answers_anonymous_reviews_with_401(world: World, name: str) -> None:
    before = _state()
    assert _review(Client(), name, world).status_code == 401
    assert _state() == before


@pytest.mark.parametrize("persona", ["olive", "rex"])
@pytest.mark.parametrize("name", list(READS))
def test_it_hides_the_project_from_outsiders_and_other_reviewers(
    world: World, request: pytest.FixtureRequest, persona: str, name: str
) -> None:
    response = login(request.getfixturevalue(persona)).get(READS[name](world))
    assert response.status_code == 404
    assert response.json() == {"detail": "No project 'sounds' (or you are not in it)."}


@pytest.mark.parametrize("persona", ["olive", "rex"])
@pytest.mark.parametrize("name", list(REVIEWS))
def test_it_refuses_outsiders_reviews_with_404(
    world: World, request: pytest.FixtureRequest, persona: str, name: str
) -> None:
    before = _state()
    assert _review(login(request.getfixturevalue(persona)), name, world).status_code == 404
    assert _state() == before


@pytest.mark.parametrize("name", list(REVIEWS))
def test_it_hides_work_of_the_project_from_a_reviewer_under_their_own_project(
    world: World, rex: Any, name: str
) -> None:
    url, body = REVIEWS[name]
    before = _state()
    response = _post(login(rex), url(world).replace("/sounds/", "/birds/"), body(world))
    assert response.status_code == 404
    assert response.json() == {"detail": f"No assignment #{world.submitted.pk} in project 'birds'."}
    assert _state() == before


@pytest.mark.parametrize("name", list(READS))
def test_it_forbids_reads_to_annotators(world: World, ann: Any, name: str) -> None:
    response = login(ann).get(READS[name](world))
    assert response.status_code == 403
    assert response.json() == {
        "detail": "Only the project's researchers and reviewers may do this."
    }


@pytest.mark.parametrize("name", list(REVIEWS))
def test_it_forbids_reviews_to_annotators(world: World, ann: Any, name: str) -> None:
    before = _state()
    response = _review(login(ann), name, world)
    assert response.status_code == 403
    assert _state() == before


@pytest.mark.parametrize("persona", ["rey", "alice"])
@pytest.mark.parametrize("name", list(READS))
def test_it_lets_reviewers_and_researchers_read(
    world: World, request: pytest.FixtureRequest, persona: str, name: str
) -> None:
    assert login(request.getfixturevalue(persona)).get(READS[name](world)).status_code == 200


# Decisions ------------------------------------------------------------------------------


def test_the_review_queue_lists_submitted_work(world: World, rey: Any) -> None:
    response = login(rey).get(f"{P}/review")
    assert response.status_code == 200
    page = response.json()
    assert page["count"] == 1
    [item] = page["items"]
    assert (item["id"], item["worker"]["username"]) == (world.submitted.pk, "abe")
    assert [c["text"] for c in item["captions"]] == ["abe hears a dog bark"]
    assert item["auto_approve_at"] is not None
    assert item["review"] is None


def test_a_reviewer_approves_and_the_reward_is_booked(world: World, rey: Any) -> None:
    response = _review(login(rey), "approve", world)
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["review"]["decision"], body["review"]["reviewer"]) == (
        "approved",
        "approved",
        "rey",
    )
    assert LedgerEntry.objects.get().amount_cents == 10


def test_a_rejection_names_its_reason_and_reopens_the_slot(world: World, rey: Any) -> None:
    hit = Hit.objects.get(pk=world.submitted.hit_id)
    response = _review(login(rey), "reject", world)
    assert response.status_code == 200
    assert response.json()["review"]["reason"] == RejectReason.OFF_TOPIC
    world.submitted.refresh_from_db()
    assert world.submitted.state == Assignment.State.REJECTED
    assert world.submitted.feedback == REASON_FEEDBACK[RejectReason.OFF_TOPIC]
    assert Hit.objects.get(pk=hit.pk).taken == hit.taken - 1


def test_it_names_an_unknown_reject_reason(world: World, rey: Any) -> None:
    before = _state()
    url = f"{P}/assignments/{world.submitted.pk}/reject"
    response = _post(login(rey), url, {"reason": "ugly"})
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["reason"]
    assert _state() == before


def test_a_reviewer_fixes_the_text_and_both_versions_are_kept(world: World, rey: Any) -> None:
    response = _review(login(rey), "fix", world)
    assert response.status_code == 200
    [caption] = response.json()["captions"]
    assert (caption["text"], caption["fixed_text"]) == (
        "abe hears a dog bark",
        "a dog barks twice nearby",
    )
    assert Assignment.objects.get(pk=world.submitted.pk).state == Assignment.State.APPROVED


def test_a_fix_breaking_the_rules_changes_nothing(world: World, rey: Any) -> None:
    before = _state()
    caption = world.submitted.captions.get()
    url = f"{P}/assignments/{world.submitted.pk}/fix"
    response = _post(login(rey), url, {"fixes": {str(caption.pk): "there is a dog"}})
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [f"fix-{caption.pk}"]
    assert _state() == before


def test_reviewing_twice_is_409(world: World, rey: Any) -> None:
    client = login(rey)
    _review(client, "approve", world)
    response = _review(client, "reject", world)
    assert response.status_code == 409
    assert response.json() == {"detail": "This assignment is approved; it cannot become rejected."}


def test_a_worker_reads_the_reviewers_feedback(world: World, rey: Any, abe: Any) -> None:
    _review(login(rey), "reject", world)
    body = login(abe).get(f"/api/work/assignments/{world.submitted.pk}").json()
    assert (body["state"], body["feedback"]) == (
        "rejected",
        REASON_FEEDBACK[RejectReason.OFF_TOPIC],
    )


# Schema -----------------------------------------------------------------------------------


def test_the_openapi_schema_documents_the_review_api(db: None) -> None:
    schema = Client().get("/api/openapi.json").json()
    assert {
        "/api/projects/{slug}/review",
        "/api/projects/{slug}/assignments/{assignment_id}",
        "/api/projects/{slug}/assignments/{assignment_id}/approve",
        "/api/projects/{slug}/assignments/{assignment_id}/reject",
        "/api/projects/{slug}/assignments/{assignment_id}/fix",
    } <= set(schema["paths"])
    fix = schema["paths"]["/api/projects/{slug}/assignments/{assignment_id}/fix"]["post"]
    assert {"200", "400", "403", "404", "409"} <= set(fix["responses"])
    assert fix["operationId"] == "annotation_api_review_fix"  # as before the move to crowd
    assert "ReviewAssignmentOut" in schema["components"]["schemas"]


# Batch requirements ----------------------------------------------------------------------


def _requirements_url(w: World) -> str:
    return f"{P}/batches/{w.submitted.hit.batch_id}/requirements"


def test_it_reads_a_batchs_requirements_with_their_defaults(world: World, rey: Any) -> None:
    response = login(rey).get(_requirements_url(world))
    assert response.status_code == 200
    assert response.json() == {
        "qualifications": [],
        "min_approval_percent": 0,
        "min_approved": 0,
        "site_wide_record": False,
        "locales": [],
    }


def test_it_sets_a_batchs_requirements_with_the_site_wide_record(
    world: World, alice: Any, qualification: Any
) -> None:
    body = {
        "qualifications": [qualification.pk],
        "min_approval_percent": 95,
        "min_approved": 10,
        "site_wide_record": True,
        "locales": ["AU", "GB"],
    }
    response = login(alice).put(_requirements_url(world), body, content_type=JSON)
    assert response.status_code == 200
    assert response.json() == body
    assert login(alice).get(_requirements_url(world)).json() == body


def test_it_takes_locales_in_any_case_and_gives_them_back_as_codes(
    world: World, alice: Any
) -> None:
    body = {"locales": ["nz", "ca", "NZ"]}
    response = login(alice).put(_requirements_url(world), body, content_type=JSON)
    assert response.json()["locales"] == ["CA", "NZ"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"qualifications": [999999]}, "qualifications"),
        ({"min_approval_percent": 101}, None),
        ({"locales": ["GB", "EN"]}, "locales"),
    ],
)
def test_it_refuses_bad_requirements(
    world: World, alice: Any, body: dict[str, Any], field: str | None
) -> None:
    response = login(alice).put(_requirements_url(world), body, content_type=JSON)
    assert response.status_code == 400
    if field:
        assert field in response.json()["errors"]


def test_it_lets_only_researchers_set_requirements(world: World, rey: Any, rex: Any) -> None:
    assert login(rey).put(_requirements_url(world), {}, content_type=JSON).status_code == 403
    assert login(rex).get(_requirements_url(world)).status_code == 404
