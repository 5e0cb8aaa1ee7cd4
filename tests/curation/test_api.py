"""The curation API: the pages' access rules, clear 404s, previews that store nothing, jobs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from core.models import Job, Project
from core.services import api_token_create
from curation.models import Label, LabelCuration, Recipe, Subset, SubsetClip
from curation.recipes import RecipeSpec
from curation.services import label_curate, recipe_save, subset_build
from tests.conftest import login, make_user
from tests.curation.conftest import Curation

URL = Callable[[Curation], str]
JSON = "application/json"


def _spec(**changes: Any) -> dict[str, Any]:
    return RecipeSpec(segment_lists=["balanced"], val_size=2, test_size=2, **changes).to_dict()


def _base(c: Curation) -> str:
    return f"/api/projects/{c.project.slug}"


# method, URL, JSON body; reads need researcher or reviewer, writes need researcher
READS: dict[str, URL] = {
    "recipes": lambda c: f"{_base(c)}/recipes",
    "recipe": lambda c: f"{_base(c)}/recipes/{c.recipe.slug}",
    "subsets": lambda c: f"{_base(c)}/subsets",
    "subset": lambda c: f"{_base(c)}/subsets/{c.subset.slug}",
    "clips": lambda c: f"{_base(c)}/subsets/{c.subset.slug}/clips",
    "labels": lambda c: f"{_base(c)}/labels",
}
WRITES: dict[str, tuple[str, URL, dict[str, Any] | None]] = {
    "put recipe": ("put", READS["recipe"], {"spec": _spec(seed=5)}),
    "preview": ("post", lambda c: f"{_base(c)}/recipes/preview", _spec()),
    "build": ("post", lambda c: f"{_base(c)}/recipes/{c.recipe.slug}/build", None),
    "fetch": ("post", lambda c: f"{_base(c)}/subsets/{c.subset.slug}/fetch", None),
    "curate label": (
        "put",
        lambda c: f"{_base(c)}/labels{c.label.mid}",
        {"excluded": True, "note": "too broad"},
    ),
}


def _write(client: Client, name: str, c: Curation, **extra: Any) -> Any:
    method, url, body = WRITES[name]
    return getattr(client, method)(url(c), body, content_type=JSON, **extra)


def _state() -> tuple[Any, ...]:
    recipes = sorted(Recipe.objects.values_list("slug", "name", "spec"), key=str)
    flags = sorted(LabelCuration.objects.values_list("project", "label", "excluded", "note"))
    return (
        recipes,
        flags,
        Subset.objects.count(),
        SubsetClip.objects.count(),
        Job.objects.count(),
    )


# Access ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(READS))
def test_it_answers_anonymous_reads_with_401(curation: Curation, name: str) -> None:
    assert Client().get(READS[name](curation)).status_code == 401


@pytest.mark.parametrize("name", list(WRITES))
def test_it_answers_anonymous_writes_with_401(curation: Curation, name: str) -> None:
    before = _state()
    assert _write(Client(), name, curation).status_code == 401
    assert _state() == before


@pytest.mark.parametrize("name", list(READS))
def test_it_hides_alices_project_from_olive(curation: Curation, olive: Any, name: str) -> None:
    response = login(olive).get(READS[name](curation))
    assert response.status_code == 404
    assert response.json() == {"detail": "No project 'sounds' (or you are not in it)."}


@pytest.mark.parametrize("name", list(WRITES))
def test_it_refuses_olives_writes_with_404(curation: Curation, olive: Any, name: str) -> None:
    before = _state()
    assert _write(login(olive), name, curation).status_code == 404
    assert _state() == before


@pytest.mark.parametrize("name", list(READS))
def test_it_forbids_reads_to_annotators(curation: Curation, ann: Any, name: str) -> None:
    response = login(ann).get(READS[name](curation))
    assert response.status_code == 403
    assert response.json() == {
        "detail": "Only the project's researchers and reviewers may do this."
    }


@pytest.mark.parametrize("name", list(WRITES))
def test_it_forbids_writes_to_annotators(curation: Curation, ann: Any, name: str) -> None:
    before = _state()
    assert _write(login(ann), name, curation).status_code == 403
    assert _state() == before


@pytest.mark.parametrize("name", list(READS))
def test_it_lets_reviewers_read(curation: Curation, rey: Any, name: str) -> None:
    assert login(rey).get(READS[name](curation)).status_code == 200


@pytest.mark.parametrize("name", list(WRITES))
def test_it_forbids_writes_to_reviewers(curation: Curation, rey: Any, name: str) -> None:
    before = _state()
    response = _write(login(rey), name, curation)
    assert response.status_code == 403
    assert response.json() == {"detail": "Only the project's researchers may do this."}
    assert _state() == before


@pytest.mark.parametrize(
    ("url", "detail"),
    [
        ("/api/projects/nope/recipes", "No project 'nope' (or you are not in it)."),
        ("/api/projects/sounds/recipes/nope", "No recipe 'nope' in project 'sounds'."),
        ("/api/projects/sounds/subsets/nope", "No subset 'nope' in project 'sounds'."),
        ("/api/projects/sounds/subsets/nope/clips", "No subset 'nope' in project 'sounds'."),
    ],
)
def test_it_names_what_it_could_not_find(
    curation: Curation, alice: Any, url: str, detail: str
) -> None:
    response = login(alice).get(url)
    assert response.status_code == 404
    assert response.json() == {"detail": detail}


def test_it_404s_writes_to_unknown_recipes_and_subsets(curation: Curation, alice: Any) -> None:
    client = login(alice)
    for url in (
        "/api/projects/sounds/recipes/nope/build",
        "/api/projects/sounds/subsets/nope/fetch",
    ):
        assert client.post(url, content_type=JSON).status_code == 404
    assert not Job.objects.exists()


def test_it_accepts_a_bearer_token(curation: Curation, alice: Any) -> None:
    _, raw = api_token_create(user=alice, name="script")
    response = Client().get(READS["recipes"](curation), HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200


def test_it_requires_csrf_for_session_writes(curation: Curation, alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get(f"/projects/{curation.project.slug}/recipes/{curation.recipe.slug}/")
    assert _write(client, "preview", curation).status_code == 403
    token = client.cookies["csrftoken"].value
    assert _write(client, "preview", curation, HTTP_X_CSRFTOKEN=token).status_code == 200


def test_it_lists_the_endpoints_in_the_schema(db: None) -> None:
    paths = set(Client().get("/api/openapi.json").json()["paths"])
    assert {
        "/api/projects/{slug}/recipes",
        "/api/projects/{slug}/recipes/preview",
        "/api/projects/{slug}/recipes/{recipe_slug}",
        "/api/projects/{slug}/recipes/{recipe_slug}/build",
        "/api/projects/{slug}/subsets",
        "/api/projects/{slug}/subsets/{subset_slug}",
        "/api/projects/{slug}/subsets/{subset_slug}/clips",
        "/api/projects/{slug}/subsets/{subset_slug}/fetch",
        "/api/labels",
        "/api/projects/{slug}/labels",
        "/api/projects/{slug}/labels/{mid}",
    } <= paths


# Recipes --------------------------------------------------------------------------------


def test_it_lists_and_gets_recipes(curation: Curation, alice: Any) -> None:
    client = login(alice)
    listed = client.get(READS["recipes"](curation)).json()
    assert [(r["slug"], r["name"]) for r in listed] == [("balanced", "Balanced")]
    got = client.get(READS["recipe"](curation)).json()
    assert got["spec"] == curation.recipe.spec


def test_it_replaces_a_recipe_with_put(curation: Curation, alice: Any) -> None:
    response = _write(login(alice), "put recipe", curation)
    assert response.status_code == 200
    curation.recipe.refresh_from_db()
    assert curation.recipe.spec == _spec(seed=5)
    assert response.json()["name"] == "Balanced"


def test_it_creates_a_recipe_with_put(curation: Curation, alice: Any) -> None:
    response = login(alice).put(
        f"{_base(curation)}/recipes/night",
        {"name": "Night sounds", "spec": _spec(min_clips_per_label=2)},
        content_type=JSON,
    )
    assert response.status_code == 201
    recipe = Recipe.objects.get(project=curation.project, slug="night")
    assert (recipe.name, recipe.spec["min_clips_per_label"], recipe.created_by) == (
        "Night sounds",
        2,
        alice,
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"max_label_share": 2.0}, "max_label_share"),
        ({"segment_lists": ["youtube"]}, "segment_lists"),
        ({"colour": "red"}, None),
        ({"seed": -1}, "seed"),
        ({"min_clips_per_label": 10**4000}, "min_clips_per_label"),
    ],
)
def test_it_refuses_a_bad_spec_naming_the_field(
    curation: Curation, alice: Any, spec: dict[str, Any], field: str | None
) -> None:
    before = _state()
    response = login(alice).put(READS["recipe"](curation), {"spec": spec}, content_type=JSON)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert (field or "colour") in response.json()["detail"]
    assert _state() == before


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"seed": -1}, "seed"), ({"max_clips_per_label": 10**30}, "max_clips_per_label")],
)
def test_it_refuses_a_bad_spec_to_preview_naming_the_field(
    curation: Curation, alice: Any, spec: dict[str, Any], field: str
) -> None:
    response = login(alice).post(WRITES["preview"][1](curation), spec, content_type=JSON)

    assert response.status_code == 400
    assert response.json()["field"] == field


def test_it_refuses_a_deeply_nested_body_without_a_server_error(
    curation: Curation, alice: Any
) -> None:
    body = '{"spec": {"seed": ' + "[" * 30_000 + "]" * 30_000 + "}}"

    response = login(alice).put(READS["recipe"](curation), body, content_type=JSON)

    assert 400 <= response.status_code < 500


def test_it_refuses_a_reserved_recipe_address(curation: Curation, alice: Any) -> None:
    response = login(alice).put(
        f"{_base(curation)}/recipes/import", {"spec": _spec()}, content_type=JSON
    )
    assert response.status_code == 400
    assert "reserved" in response.json()["detail"]


# Preview ---------------------------------------------------------------------------------


def test_it_previews_the_figures_a_build_would_report_and_stores_nothing(
    curation: Curation, alice: Any
) -> None:
    before = _state()
    response = _write(login(alice), "preview", curation)
    assert response.status_code == 200
    figures = response.json()
    assert _state() == before
    report = curation.subset.report  # built from the same spec
    for key in ("candidate_clips", "selected_clips", "labels_kept", "splits"):
        assert figures[key] == report[key]
    assert figures["skew_before"] == pytest.approx(report["skew_before"])
    assert figures["skew_after"] == pytest.approx(report["skew_after"])
    assert figures["labels"] == report["labels"][:10]
    assert figures["labels"][0] == {"mid": "/m/04rlf", "name": "Music", "before": 15, "after": 15}


def test_it_previews_what_a_changed_spec_would_select(curation: Curation, alice: Any) -> None:
    spec = _spec(min_clips_per_label=4, excluded_subtrees=["Music"])
    response = login(alice).post(WRITES["preview"][1](curation), spec, content_type=JSON)
    figures = response.json()
    assert figures["labels_kept"] == 1
    # three of Speech's nine clips also carry Music, and go with it
    assert figures["labels"] == [{"mid": "/m/09x0r", "name": "Speech", "before": 6, "after": 6}]
    recipe = recipe_save(project=curation.project, name="No music", spec=spec)
    assert subset_build(recipe=recipe).report["selected_clips"] == figures["selected_clips"]


def _exclude(project: Project, label: Label) -> None:
    label_curate(
        project=project, label=label, needs_visuals=False, needs_expertise=False, excluded=True
    )


def test_another_projects_flags_leave_this_projects_subsets_alone(
    curation: Curation, alice: Any, olive: Any
) -> None:
    spec = _spec(min_clips_per_label=4, excluded_flags=["excluded"])
    preview = WRITES["preview"][1](curation)
    before = login(alice).post(preview, spec, content_type=JSON).json()

    _exclude(Project.objects.get(slug="birds"), curation.label)

    assert login(alice).post(preview, spec, content_type=JSON).json() == before
    recipe = recipe_save(project=curation.project, name="Flags", spec=spec)
    assert "Speech" in {row["name"] for row in subset_build(recipe=recipe).report["labels"]}


def test_the_projects_own_flags_exclude_labels_from_its_subsets(
    curation: Curation, alice: Any
) -> None:
    _exclude(curation.project, curation.label)

    spec = _spec(min_clips_per_label=4, excluded_flags=["excluded"])
    figures = login(alice).post(WRITES["preview"][1](curation), spec, content_type=JSON).json()
    assert "Speech" not in {row["name"] for row in figures["labels"]}


@pytest.mark.parametrize(
    ("spec", "field", "detail"),
    [
        (_spec(max_label_share=1.5), "max_label_share", "a fraction between 0 and 1"),
        (_spec(excluded_subtrees=["Jazzz"]), "excluded_subtrees", "no label named Jazzz"),
        ({**_spec(), "val_size": 40, "test_size": 40}, None, "only 50 were selected"),
        ({"segment_lists": "balanced"}, "segment_lists", "a non-empty list"),
    ],
)
def test_it_explains_a_preview_it_cannot_make(
    curation: Curation, alice: Any, spec: dict[str, Any], field: str | None, detail: str
) -> None:
    before = _state()
    response = login(alice).post(WRITES["preview"][1](curation), spec, content_type=JSON)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert detail in response.json()["detail"]
    assert _state() == before


# Builds, subsets, clips, fetching -------------------------------------------------------


def test_it_queues_a_build_and_answers_with_the_job(
    curation: Curation, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = login(alice).post(
            WRITES["build"][1](curation), {"name": "Scripted"}, content_type=JSON
        )
    assert response.status_code == 201
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.params) == (
        "subset_build",
        {"recipe_id": curation.recipe.pk, "name": "Scripted"},
    )
    assert (job.project, job.created_by) == (curation.project, alice)
    assert response.json()["state"] == "queued"
    assert len(callbacks) == 1


def test_it_queues_a_build_without_a_body(
    curation: Curation, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        # a bare POST, as `curl -X POST` sends it (the test client's default is a form body)
        response = login(alice).generic("POST", WRITES["build"][1](curation))
    assert response.status_code == 201
    assert Job.objects.get().params["name"] == ""


def test_it_queues_a_fetch_of_the_subset(
    curation: Curation, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = _write(login(alice), "fetch", curation)
    assert response.status_code == 201
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.params, job.queue) == (
        "clips_fetch",
        {"subset_id": curation.subset.pk},
        "media",
    )
    assert len(callbacks) == 1


def test_it_lists_subsets_with_counts(curation: Curation, rey: Any) -> None:
    rows = login(rey).get(READS["subsets"](curation)).json()
    assert [(r["slug"], r["recipe"], r["clips"], r["ready"]) for r in rows] == [
        ("balanced-1", "balanced", 50, 1)
    ]


def test_it_gives_a_subsets_report_and_fetch_state(curation: Curation, rey: Any) -> None:
    body = login(rey).get(READS["subset"](curation)).json()
    assert body["report"]["selected_clips"] == 50
    assert body["statuses"] == {
        "pending": 49,
        "fetching": 0,
        "ready": 1,
        "failed": 0,
        "unavailable": 0,
    }
    assert body["percent_ready"] == 2
    assert body["spec"] == curation.recipe.spec


def test_it_pages_a_subsets_clips(curation: Curation, rey: Any) -> None:
    client = login(rey)
    first = client.get(READS["clips"](curation), {"per_page": 20}).json()
    assert (first["count"], first["page"], first["pages"], len(first["items"])) == (50, 1, 3, 20)
    last = client.get(READS["clips"](curation), {"per_page": 20, "page": 3}).json()
    assert len(last["items"]) == 10
    ids = {c["id"] for page in (first, last) for c in page["items"]}
    assert len(ids) == 30


def test_it_filters_a_subsets_clips(curation: Curation, rey: Any) -> None:
    client = login(rey)
    ready = client.get(READS["clips"](curation), {"status": "ready"}).json()
    assert ready["count"] == 1
    clip = ready["items"][0]
    assert clip["id"] == curation.clip.pk
    assert clip["audio_url"] == f"/projects/sounds/clips/{curation.clip.pk}/audio"
    assert clip["video_url"] == f"/projects/sounds/clips/{curation.clip.pk}/video"
    assert clip["labels"]
    val = client.get(READS["clips"](curation), {"split": "val"}).json()
    assert val["count"] == 2
    assert {c["split"] for c in val["items"]} == {"val"}


@pytest.mark.parametrize(
    ("query", "status"),
    [({"split": "dev"}, 400), ({"status": "lost"}, 400), ({"page": 9}, 404)],
)
def test_it_refuses_bad_clip_queries(
    curation: Curation, rey: Any, query: dict[str, Any], status: int
) -> None:
    response = login(rey).get(READS["clips"](curation), query)
    assert response.status_code == status
    assert response.json()["detail"]


# Labels ----------------------------------------------------------------------------------


def test_it_lists_the_shared_ontology_with_children(curation: Curation, rey: Any) -> None:
    client = login(rey)
    assert len(client.get("/api/labels").json()) == 632
    rows = client.get("/api/labels", {"q": "human voice"}).json()
    assert [r["mid"] for r in rows] == ["/m/09l8g"]
    assert "/m/09x0r" in rows[0]["children"]
    assert "excluded" not in rows[0]  # curation flags are per project


def test_it_lists_the_projects_labels_with_its_flags(curation: Curation, rey: Any) -> None:
    label_curate(
        project=curation.project,
        label=curation.label,
        needs_visuals=True,
        needs_expertise=False,
        excluded=False,
        note="who?",
    )
    rows = login(rey).get(f"{_base(curation)}/labels", {"q": "speech"}).json()
    speech = next(r for r in rows if r["name"] == "Speech")
    assert (speech["needs_visuals"], speech["excluded"], speech["curation_note"]) == (
        True,
        False,
        "who?",
    )


@pytest.mark.parametrize("address", ["m/09x0r", "/m/09x0r"])
def test_it_curates_a_label_for_the_project_only(
    curation: Curation, alice: Any, olive: Any, address: str
) -> None:
    response = login(alice).put(
        f"{_base(curation)}/labels/{address}",
        {"excluded": True, "note": " too broad "},
        content_type=JSON,
    )

    assert response.status_code == 200
    assert (response.json()["mid"], response.json()["excluded"]) == ("/m/09x0r", True)
    assert response.json()["curation_note"] == "too broad"
    birds = login(olive).get("/api/projects/birds/labels", {"q": "speech"}).json()
    assert not any(r["excluded"] or r["curation_note"] for r in birds)


def test_it_404s_curating_an_unknown_label_on_the_api(curation: Curation, alice: Any) -> None:
    response = login(alice).put(f"{_base(curation)}/labels/m/nope", {}, content_type=JSON)
    assert response.status_code == 404
    assert response.json()["detail"] == "No AudioSet label '/m/nope'."


def test_it_shows_labels_to_researchers_of_any_project(curation: Curation, olive: Any) -> None:
    assert login(olive).get("/api/labels", {"q": "dog"}).status_code == 200


def test_it_forbids_labels_to_annotators_only(curation: Curation, ann: Any) -> None:
    assert login(ann).get("/api/labels").status_code == 403
    assert login(make_user("loner")).get("/api/labels").status_code == 403
