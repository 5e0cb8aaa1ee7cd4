"""/api/projects/{slug}/runs…: what researchers script, with the pages' access rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from core.models import Job, Project
from core.services import api_token_create
from corpus.models import Snapshot
from curation.models import Clip, Subset, SubsetClip
from modeling.models import Suggestion, TrainingRun
from tests.modeling.factories import make_run as _run
from tests.modeling.factories import ready_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def snapshot(project: Project) -> Snapshot:
    return ready_snapshot(project)


def _client(user: Any) -> Client:
    _, raw = api_token_create(user=user, name="script")
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _post(client: Client, url: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(url, json.dumps(body or {}), content_type="application/json")


def test_a_researcher_starts_a_run_by_snapshot_version(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    response = _post(
        _client(alice),
        "/api/projects/sounds/runs",
        {"model": "bilstm", "snapshot": 1, "preset": "tiny", "overrides": ["train.epochs=4"]},
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["model_name"] == "bilstm"
    assert body["state"] == "queued"
    assert body["config"]["run"]["train"]["epochs"] == 4
    assert Job.objects.get(pk=body["job_id"]).queue == "gpu"


def test_a_run_started_through_the_api_records_its_recipe(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    response = _post(
        _client(alice),
        "/api/projects/sounds/runs",
        {"model": "bilstm", "snapshot": 1, "preset": "paper", "epochs": 6},
    )

    assert response.status_code == 201, response.content
    recipe = response.json()["recipe"]
    assert recipe["paper"].startswith("Bhosale et al.")
    assert recipe["changes"] == [
        {
            "setting": "train.epochs",
            "recipe": 30,
            "run": 6,
            "why": "scaled",
            "reason": "the recipe scaled to 6 caption epochs",
        },
        {
            "setting": "train.lr",
            "recipe": 1e-4,
            "run": 1e-3,
            "why": "adapted",
            "reason": recipe["changes"][1]["reason"],  # its words: tests/modeling/test_recipes.py
        },
    ]
    assert TrainingRun.objects.get().recipe == recipe
    assert response.json()["config"]["run"]["vocab"]["min_count"] == 10


def test_a_run_started_through_the_api_may_name_a_recipe_by_source(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    response = _post(
        _client(alice),
        "/api/projects/sounds/runs",
        {"model": "act", "snapshot": 1, "preset": "paper", "recipe": "act-code"},
    )

    assert response.status_code == 201, response.content
    assert response.json()["recipe"]["name"] == "act-code"
    assert response.json()["config"]["run"]["train"]["epochs"] == 30


def test_a_recipe_of_another_model_is_refused_through_the_api(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    response = _post(
        _client(alice),
        "/api/projects/sounds/runs",
        {"model": "act", "snapshot": 1, "recipe": "maac-code"},
    )

    assert response.status_code == 400
    assert "recipe 'maac-code' trains maac, not 'act'" in response.json()["detail"]
    assert not TrainingRun.objects.exists()


def test_a_run_switches_on_spec_augment_through_the_api(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    overrides = ["train.spec_augment=true", "train.spec_time_mask=20"]
    response = _post(
        _client(alice),
        "/api/projects/sounds/runs",
        {"model": "lstm", "snapshot": 1, "preset": "tiny", "overrides": overrides},
    )

    assert response.status_code == 201, response.content
    train = response.json()["config"]["run"]["train"]
    assert train["spec_augment"] is True
    assert train["spec_time_mask"] == 20


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "bilstm", "snapshot": 9}, "No snapshot v9"),
        ({"model": "gpt", "snapshot": 1}, "unknown model 'gpt'"),
        ({"model": "lstm", "snapshot": 1, "overrides": ["train.nope=1"]}, "train.nope"),
        (
            {"model": "lstm", "snapshot": 1, "overrides": ["model.encoder=wav2vec"]},
            "'model.encoder': 'wav2vec' is not one of",
        ),
        (
            {"model": "lstm", "snapshot": 1, "overrides": ["train.spec_augment=maybe"]},
            "train.spec_augment",
        ),
        (
            {
                "model": "lstm",
                "snapshot": 1,
                "overrides": ["model.encoder=ast", "model.encoder_weights=/no/ast.pth"],
            },
            "model.encoder_weights: /no/ast.pth is not in the encoder weights folder",
        ),
    ],
)
def test_a_bad_request_says_what_is_wrong(
    project: Project, snapshot: Snapshot, alice: Any, body: dict[str, Any], message: str
) -> None:
    response = _post(_client(alice), "/api/projects/sounds/runs", body)

    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not TrainingRun.objects.exists()


def test_reviewers_read_runs_but_cannot_start_one(
    project: Project, snapshot: Snapshot, rey: Any
) -> None:
    run = _run(project, snapshot)
    client = _client(rey)

    assert client.get("/api/projects/sounds/runs").json()[0]["id"] == run.pk
    assert client.get(f"/api/projects/sounds/runs/{run.pk}/curve").status_code == 200
    response = _post(client, "/api/projects/sounds/runs", {"model": "lstm", "snapshot": 1})
    assert response.status_code == 403


@pytest.mark.parametrize(
    "path", ["/runs", "/runs/{id}", "/runs/{id}/curve", "/runs/{id}/suggestions"]
)
def test_outsiders_and_annotators_see_nothing(
    project: Project, snapshot: Snapshot, olive: Any, ann: Any, path: str
) -> None:
    run = _run(project, snapshot)
    url = "/api/projects/sounds" + path.format(id=run.pk)

    assert _client(olive).get(url).status_code == 404
    assert _client(ann).get(url).status_code == 403


def test_a_run_id_of_another_project_is_404(
    project: Project, snapshot: Snapshot, olive: Any
) -> None:
    run = _run(project, snapshot)
    theirs = Project.objects.create(name="Theirs", slug="theirs")
    from core.services import membership_add

    membership_add(project=theirs, user=olive, role="researcher")

    assert _client(olive).get(f"/api/projects/theirs/runs/{run.pk}").status_code == 404


def test_suggest_refuses_clips_outside_the_project(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    run = _run(project, snapshot)
    stranger = Clip.objects.create(source=Clip.Source.LOCAL, original_name="x.wav")

    response = _post(
        _client(alice), f"/api/projects/sounds/runs/{run.pk}/suggest", {"clips": [stranger.pk]}
    )

    assert response.status_code == 400
    assert "Not clips of this project" in response.json()["detail"]
    assert not Job.objects.filter(kind="clips_caption").exists()


def test_suggest_queues_a_gpu_job_for_a_subset(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    run = _run(project, snapshot)
    subset = Subset.objects.create(project=project, name="Birds", slug="birds")

    response = _post(
        _client(alice), f"/api/projects/sounds/runs/{run.pk}/suggest", {"subset": "birds"}
    )

    assert response.status_code == 201
    job = Job.objects.get(pk=response.json()["id"])
    assert job.params["subset_id"] == subset.pk
    assert job.queue == "gpu"


def test_suggest_without_a_beam_leaves_it_to_the_runs_recipe(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    run = _run(project, snapshot)
    Subset.objects.create(project=project, name="Birds", slug="birds")

    response = _post(
        _client(alice), f"/api/projects/sounds/runs/{run.pk}/suggest", {"subset": "birds"}
    )

    assert response.status_code == 201
    assert Job.objects.get(pk=response.json()["id"]).params["beam_size"] is None


def test_suggestions_are_listed_per_clip(project: Project, snapshot: Snapshot, rey: Any) -> None:
    run = _run(project, snapshot)
    subset = Subset.objects.create(project=project, name="Birds", slug="birds")
    clip = Clip.objects.create(source=Clip.Source.LOCAL, original_name="a.wav")
    SubsetClip.objects.create(subset=subset, clip=clip, split="test")
    Suggestion.objects.create(
        run=run, clip=clip, text="a bird sings", log_prob=-2.5, mean_entropy=1.2, beam_size=3
    )

    rows = _client(rey).get(f"/api/projects/sounds/runs/{run.pk}/suggestions").json()

    assert rows == [
        {
            "clip_id": clip.pk,
            "text": "a bird sings",
            "log_prob": -2.5,
            "mean_entropy": 1.2,
            "hypotheses": [],
            "beam_size": 3,
            "created_at": rows[0]["created_at"],
        }
    ]


def test_the_schema_documents_the_run_endpoints(db: None) -> None:
    schema = Client().get("/api/openapi.json").json()
    assert "/api/projects/{slug}/runs" in schema["paths"]
    assert "/api/projects/{slug}/runs/{run_id}/suggest" in schema["paths"]


def _succeeded_with_finished_job(project: Project, snapshot: Snapshot) -> TrainingRun:
    job = Job.objects.create(
        kind="training_run",
        label="t",
        params={},
        project=project,
        state=Job.State.SUCCEEDED,
        finished_at=timezone.now(),
    )
    return _run(project, snapshot, job=job)


def test_resume_refuses_a_succeeded_run(project: Project, snapshot: Snapshot, alice: Any) -> None:
    run = _succeeded_with_finished_job(project, snapshot)

    response = _post(_client(alice), f"/api/projects/sounds/runs/{run.pk}/resume")

    assert response.status_code == 409
    assert "Start a new run from its checkpoint instead" in response.json()["detail"]
    run.refresh_from_db()
    assert run.state == TrainingRun.State.SUCCEEDED
    assert Job.objects.count() == 1


def test_a_new_run_starts_from_a_succeeded_runs_checkpoint(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    run = _succeeded_with_finished_job(project, snapshot)

    response = _post(_client(alice), f"/api/projects/sounds/runs/{run.pk}/start-from", {})

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["id"] != run.pk
    assert body["started_from"] == run.pk
    assert body["state"] == "queued"
    run.refresh_from_db()  # the config as stored (JSON)
    assert body["config"] == run.config
    job = Job.objects.get(pk=body["job_id"])
    assert job.params == {"run_id": body["id"]}
    assert job.queue == "gpu"


def test_a_new_run_starts_only_from_a_succeeded_run(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    run = _run(project, snapshot, state=TrainingRun.State.CANCELLED)

    response = _post(_client(alice), f"/api/projects/sounds/runs/{run.pk}/start-from", {})

    assert response.status_code == 409
    assert TrainingRun.objects.count() == 1


def test_reviewers_cannot_start_a_run_from_a_checkpoint(
    project: Project, snapshot: Snapshot, rey: Any
) -> None:
    run = _run(project, snapshot)

    response = _post(_client(rey), f"/api/projects/sounds/runs/{run.pk}/start-from", {})

    assert response.status_code == 403
    assert TrainingRun.objects.count() == 1
