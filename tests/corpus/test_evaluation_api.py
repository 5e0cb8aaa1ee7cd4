"""POST /api/projects/{slug}/evaluations and /human-upper-bound: who may, what is refused
with which message, and the job that carries the scores."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from core.models import Job, Project
from core.services import api_token_create, job_run
from tests.conftest import login

EVALUATIONS = "/api/projects/sounds/evaluations"
HUMAN_BOUND = "/api/projects/sounds/human-upper-bound"
PREDICTIONS = [
    {"id": "dog", "caption": "a dog barks"},
    {"id": "rain", "caption": "rain falls on a roof"},
]
REFERENCES = [
    {"id": "dog", "caption": "a dog is barking"},
    {"id": "dog", "caption": "dogs bark loudly"},
    {"id": "rain", "caption": "heavy rain falls"},
    {"id": "rain", "caption": "rain hits a tin roof"},
]
EVALUATION = {"predictions": PREDICTIONS, "references": REFERENCES, "metrics": ["bleu", "cider"]}


def post(client: Client, url: str, payload: dict[str, Any], **extra: Any) -> Any:
    return client.post(url, json.dumps(payload), content_type="application/json", **extra)


def test_it_queues_an_evaluation_job_on_the_text_queue(
    project: Project, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post(login(alice), EVALUATIONS, EVALUATION)
    assert response.status_code == 201
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.queue, job.project, job.created_by) == (
        "captions_evaluate",
        "text",
        project,
        alice,
    )
    assert job.params["predictions"] == {"dog": "a dog barks", "rain": "rain falls on a roof"}
    assert job.params["references"]["dog"] == ["a dog is barking", "dogs bark loudly"]
    assert len(callbacks) == 1  # sent to the queue once the request's transaction commits


def test_it_serves_the_scores_in_the_job_result(project: Project, alice: Any) -> None:
    client = login(alice)
    job_id = post(client, EVALUATIONS, EVALUATION).json()["id"]
    job_run(job_id=job_id)
    result = client.get(f"/api/jobs/{job_id}").json()
    assert result["state"] == "succeeded"
    assert set(result["result"]["scores"]) == {"BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "CIDEr-D"}
    assert result["result"]["clips"] == 2


def test_it_queues_a_human_bound_of_a_split(project: Project, alice: Any) -> None:
    response = post(login(alice), HUMAN_BOUND, {"split": "test"})
    assert response.status_code == 201
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.params["split"], job.params["references"]) == (
        "captions_human_bound",
        "test",
        None,
    )


def test_it_accepts_a_bearer_token(project: Project, alice: Any) -> None:
    _, raw = api_token_create(user=alice, name="laptop")
    response = post(Client(), EVALUATIONS, EVALUATION, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 201


def test_it_answers_anonymous_requests_with_401(project: Project) -> None:
    assert post(Client(), EVALUATIONS, EVALUATION).status_code == 401
    assert post(Client(), HUMAN_BOUND, {"split": "test"}).status_code == 401


def test_it_hides_the_project_from_outsiders(project: Project, olive: Any) -> None:
    response = post(login(olive), EVALUATIONS, EVALUATION)
    assert response.status_code == 404
    assert response.json()["detail"] == "No project 'sounds' (or you are not in it)."
    assert post(login(olive), HUMAN_BOUND, {"split": "test"}).status_code == 404
    assert not Job.objects.exists()


@pytest.mark.parametrize("persona", ["rey", "ann"])
def test_it_forbids_reviewers_and_annotators(
    project: Project, persona: str, request: pytest.FixtureRequest
) -> None:
    client = login(request.getfixturevalue(persona))
    response = post(client, EVALUATIONS, EVALUATION)
    assert response.status_code == 403
    assert response.json()["detail"] == "Only the project's researchers may evaluate captions."
    assert post(client, HUMAN_BOUND, {"split": "test"}).status_code == 403
    assert not Job.objects.exists()


def test_it_requires_csrf_for_session_requests(project: Project, alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert post(client, EVALUATIONS, EVALUATION).status_code == 403
    client.get(f"/projects/{project.slug}/")
    token = client.cookies["csrftoken"].value
    assert post(client, EVALUATIONS, EVALUATION, HTTP_X_CSRFTOKEN=token).status_code == 201


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"predictions": PREDICTIONS}, 'Give either "references" or "split".'),
        (
            {"predictions": PREDICTIONS, "references": REFERENCES, "split": "test"},
            'Give either "references" or "split".',
        ),
        (
            {"predictions": [{"id": "dog", "caption": " "}], "split": "test"},
            "predictions, item 1: the caption is empty",
        ),
        (
            {"predictions": [*PREDICTIONS, {"id": "dog", "caption": "woof"}], "split": "test"},
            "predictions, item 3: a second prediction for 'dog' (first at item 1); give one "
            "caption per clip",
        ),
        ({"predictions": [], "split": "test"}, "predictions: the list is empty."),
        (
            {"predictions": PREDICTIONS[:1], "references": REFERENCES},
            "1 clip(s) have no prediction ('rain').",
        ),
        (
            {"predictions": PREDICTIONS, "split": "test", "metrics": ["cidr"]},
            "metrics: Unknown metric cidr; choose from bleu, meteor, rouge, cider, spice.",
        ),
    ],
)
def test_it_refuses_bad_evaluations_with_a_reason(
    project: Project, alice: Any, payload: dict[str, Any], message: str
) -> None:
    response = post(login(alice), EVALUATIONS, payload)
    assert response.status_code == 400
    assert response.json()["detail"] == message
    assert not Job.objects.exists()


def test_it_refuses_an_unknown_split(project: Project, alice: Any) -> None:
    response = post(login(alice), EVALUATIONS, {"predictions": PREDICTIONS, "split": "dev"})
    assert response.status_code == 422  # ninja's schema validation names the field
    assert "split" in json.dumps(response.json())


def test_it_refuses_a_human_bound_without_two_captions_a_clip(project: Project, alice: Any) -> None:
    payload = {"references": [{"id": "dog", "caption": "a dog barks"}]}
    response = post(login(alice), HUMAN_BOUND, payload)
    assert response.status_code == 400
    assert "no clip has two or more captions" in response.json()["detail"]


def test_it_lists_the_endpoints_in_the_schema(db: None) -> None:
    paths = set(Client().get("/api/openapi.json").json()["paths"])
    assert {"/api/projects/{slug}/evaluations", "/api/projects/{slug}/human-upper-bound"} <= paths
