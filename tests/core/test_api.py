"""The JSON API: schema, bearer tokens, per-project visibility, retry, and CSRF for sessions."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from typing import Any, TypedDict

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from core.models import ApiToken, Job, Project
from core.services import api_token_create, api_token_revoke, api_tokens, job_create
from core.services.api_tokens import api_token_lookups_forget
from tests.conftest import login


class _BearerHeader(TypedDict):
    """The WSGI header a test client passes as `**extra`; a TypedDict so the keyword checks."""

    HTTP_AUTHORIZATION: str


def _bearer(raw: str) -> _BearerHeader:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def _token(user: Any) -> str:
    return api_token_create(user=user, name="script")[1]


def _job(project: Project | None, *, state: str = Job.State.QUEUED) -> Job:
    job = job_create(kind="ontology_import", params={"path": "x"}, project=project)
    if state != Job.State.QUEUED:
        finished_at = timezone.now() if state in Job.FINISHED_STATES else None
        Job.objects.filter(pk=job.pk).update(state=state, finished_at=finished_at, error="boom")
        job.refresh_from_db()
    return job


def _ids(response: Any) -> set[int]:
    return {row["id"] for row in response.json()}


# Schema --------------------------------------------------------------------------------


def test_it_publishes_an_openapi_schema_listing_jobs_and_projects(db: None) -> None:
    response = Client().get("/api/openapi.json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    assert {"/api/jobs/", "/api/projects/", "/api/jobs/{job_id}/retry"} <= set(schema["paths"])


def test_it_documents_bearer_authentication(db: None) -> None:
    response = Client().get("/api/openapi.json")
    assert response.status_code == 200
    schemes = response.json()["components"]["securitySchemes"]
    assert {"type": "http", "scheme": "bearer"}.items() <= schemes["TokenAuth"].items()


# Tokens --------------------------------------------------------------------------------


def test_it_authenticates_a_bearer_token(project: Project, alice: Any) -> None:
    response = Client().get("/api/projects/", **_bearer(_token(alice)))
    assert response.status_code == 200
    assert response.json() == [
        {"slug": "sounds", "name": "Everyday sounds", "description": "", "role": "researcher"}
    ]


def test_it_records_when_a_token_was_last_used(project: Project, alice: Any) -> None:
    token, raw = api_token_create(user=alice, name="script")
    response = Client().get("/api/projects/", **_bearer(raw))
    assert response.status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_it_records_a_tokens_use_at_most_once_a_minute(project: Project, alice: Any) -> None:
    token, raw = api_token_create(user=alice, name="script")
    recent = timezone.now() - timedelta(seconds=30)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=recent)
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == recent
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=recent - timedelta(minutes=1))
    api_token_lookups_forget()  # API_TOKEN_CACHE_SECONDS later: the token is looked up again
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at > recent


def test_it_rejects_a_revoked_token(project: Project, alice: Any) -> None:
    token, raw = api_token_create(user=alice, name="script")
    api_token_revoke(token=token)
    response = Client().get("/api/projects/", **_bearer(raw))
    assert response.status_code == 401
    token.refresh_from_db()
    assert token.last_used_at is None


@pytest.mark.parametrize(
    "header",
    ["Bearer emk_not-a-real-token", "Bearer ", "Token {raw}", "{raw}"],
    ids=["wrong key", "empty key", "wrong scheme", "no scheme"],
)
def test_it_rejects_a_wrong_token(project: Project, alice: Any, header: str) -> None:
    raw = _token(alice)
    response = Client().get("/api/projects/", HTTP_AUTHORIZATION=header.format(raw=raw))
    assert response.status_code == 401


def test_it_rejects_the_token_of_a_deactivated_user(project: Project, alice: Any) -> None:
    raw = _token(alice)
    alice.is_active = False
    alice.save()
    response = Client().get("/api/projects/", **_bearer(raw))
    assert response.status_code == 401


def test_a_token_works_until_it_expires(project: Project, alice: Any) -> None:
    soon = timezone.now() + timedelta(hours=1)
    _, raw = api_token_create(user=alice, name="script", expires_at=soon)
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 200


def test_an_expired_token_is_refused(project: Project, alice: Any) -> None:
    created = timezone.now() - timedelta(days=8)
    token, raw = api_token_create(
        user=alice, name="script", expires_at=created + timedelta(days=7), now=created
    )
    assert token.is_expired()
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 401


# A process reuses a token's lookup for API_TOKEN_CACHE_SECONDS -------------------------


def _token_lookups(raw: str) -> int:
    """Queries of the token table by key a bearer request with `raw` makes."""
    with CaptureQueriesContext(connection) as queries:
        assert Client().get("/api/projects/", **_bearer(raw)).status_code == 200
    return sum("key_hash" in q["sql"] for q in queries.captured_queries)


def test_a_token_is_looked_up_once_within_the_cache_seconds(
    project: Project, alice: Any, monkeypatch: Any
) -> None:
    raw = _token(alice)
    clock = [1000.0]
    monkeypatch.setattr(api_tokens.time, "monotonic", lambda: clock[0])
    assert [_token_lookups(raw), _token_lookups(raw)] == [1, 0]
    clock[0] += 4.9
    assert _token_lookups(raw) == 0
    clock[0] += 0.2
    assert [_token_lookups(raw), _token_lookups(raw)] == [1, 0]


def test_a_used_token_is_refused_once_revoked(project: Project, alice: Any) -> None:
    token, raw = api_token_create(user=alice, name="script")
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 200
    api_token_revoke(token=token)
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 401


def test_a_used_token_is_refused_once_its_user_is_deactivated(project: Project, alice: Any) -> None:
    raw = _token(alice)
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 200
    alice.is_active = False
    alice.save()
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 401


def test_a_token_revoked_by_another_process_is_refused_within_the_cache_seconds(
    project: Project, alice: Any, monkeypatch: Any
) -> None:
    token, raw = api_token_create(user=alice, name="script")
    clock = [1000.0]
    monkeypatch.setattr(api_tokens.time, "monotonic", lambda: clock[0])
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 200
    # another process revokes it: a row update that sends no signal here
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    clock[0] += 5.01
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 401


def test_a_token_expiring_within_the_cache_seconds_is_not_kept(
    project: Project, alice: Any, monkeypatch: Any
) -> None:
    _, raw = api_token_create(
        user=alice, name="script", expires_at=timezone.now() + timedelta(seconds=3)
    )
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 200
    assert hashlib.sha256(raw.encode()).hexdigest() not in api_tokens._LOOKUPS


def test_no_token_is_kept_with_no_cache_seconds(
    project: Project, alice: Any, settings: Any
) -> None:
    settings.API_TOKEN_CACHE_SECONDS = 0
    raw = _token(alice)
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 200
    assert hashlib.sha256(raw.encode()).hexdigest() not in api_tokens._LOOKUPS


def test_a_token_cannot_expire_before_it_is_created(alice: Any) -> None:
    with pytest.raises(ValidationError, match="expire after it is created"):
        api_token_create(user=alice, name="script", expires_at=timezone.now() - timedelta(days=1))


def test_a_read_only_token_reads(project: Project, alice: Any) -> None:
    _, raw = api_token_create(user=alice, name="reader", read_only=True)
    response = Client().get(f"/api/jobs/{_job(project).pk}", **_bearer(raw))
    assert response.status_code == 200


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_a_read_only_token_changes_nothing(project: Project, alice: Any, method: str) -> None:
    job = _job(project)
    _, raw = api_token_create(user=alice, name="reader", read_only=True)
    response = getattr(Client(), method)(f"/api/jobs/{job.pk}/cancel", **_bearer(raw))
    assert response.status_code in (403, 405)
    if method == "post":
        assert response.status_code == 403
        assert "read-only" in response.json()["detail"]
    job.refresh_from_db()
    assert job.state == Job.State.QUEUED


# Visibility ----------------------------------------------------------------------------


@pytest.fixture
def jobs(project: Project, olive: Any) -> dict[str, Job]:
    return {
        "sounds": _job(project),
        "birds": _job(Project.objects.get(slug="birds")),
        "site-wide": _job(None),
    }


def test_it_lists_only_jobs_of_projects_a_token_holder_researches(
    jobs: dict[str, Job], olive: Any
) -> None:
    response = Client().get("/api/jobs/", **_bearer(_token(olive)))
    assert response.status_code == 200
    assert _ids(response) == {jobs["birds"].pk}


def test_it_lists_the_researchers_own_project_jobs(jobs: dict[str, Job], alice: Any) -> None:
    response = Client().get("/api/jobs/", **_bearer(_token(alice)))
    assert response.status_code == 200
    assert _ids(response) == {jobs["sounds"].pk}


def test_it_lists_site_wide_jobs_to_staff_only(jobs: dict[str, Job], staff: Any) -> None:
    response = Client().get("/api/jobs/", **_bearer(_token(staff)))
    assert response.status_code == 200
    assert _ids(response) == {job.pk for job in jobs.values()}


@pytest.mark.parametrize(
    ("method", "action"), [("get", ""), ("post", "/retry"), ("post", "/cancel")]
)
def test_it_keeps_a_researcher_away_from_a_site_wide_job(
    project: Project, alice: Any, method: str, action: str
) -> None:
    site_wide = _job(None, state=Job.State.FAILED)
    client = Client()
    response = getattr(client, method)(
        f"/api/jobs/{site_wide.pk}{action}", **_bearer(_token(alice))
    )
    assert response.status_code == 404
    assert not Job.objects.filter(retry_of=site_wide).exists()
    assert "ontology_import" not in response.content.decode()


def test_it_lets_staff_retry_a_site_wide_job(
    db: None, staff: Any, django_capture_on_commit_callbacks: Any
) -> None:
    site_wide = _job(None, state=Job.State.FAILED)
    with django_capture_on_commit_callbacks(execute=False):
        response = Client().post(f"/api/jobs/{site_wide.pk}/retry", **_bearer(_token(staff)))
    assert response.status_code == 201
    assert Job.objects.filter(retry_of=site_wide, project=None).exists()


@pytest.mark.parametrize("persona", ["rey", "ann"])
def test_it_lists_no_jobs_for_reviewers_and_annotators(
    jobs: dict[str, Job], persona: str, request: pytest.FixtureRequest
) -> None:
    user = request.getfixturevalue(persona)
    response = Client().get("/api/jobs/", **_bearer(_token(user)))
    assert response.status_code == 200
    assert response.json() == []


def test_it_filters_jobs_by_project(jobs: dict[str, Job], alice: Any) -> None:
    response = Client().get("/api/jobs/", {"project": "sounds"}, **_bearer(_token(alice)))
    assert response.status_code == 200
    assert _ids(response) == {jobs["sounds"].pk}


def test_it_hides_another_projects_job(jobs: dict[str, Job], olive: Any) -> None:
    response = Client().get(f"/api/jobs/{jobs['sounds'].pk}", **_bearer(_token(olive)))
    assert response.status_code == 404


def test_it_describes_a_visible_job(jobs: dict[str, Job], alice: Any) -> None:
    response = Client().get(f"/api/jobs/{jobs['sounds'].pk}", **_bearer(_token(alice)))
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["kind"], body["state"], body["project"]) == (
        jobs["sounds"].pk,
        "ontology_import",
        "queued",
        "sounds",
    )


def test_it_hides_a_project_the_token_holder_is_not_in(jobs: dict[str, Job], olive: Any) -> None:
    response = Client().get("/api/projects/sounds", **_bearer(_token(olive)))
    assert response.status_code == 404


# Retry and cancel ----------------------------------------------------------------------


def test_it_retries_a_failed_job_with_a_token(
    project: Project, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    failed = _job(project, state=Job.State.FAILED)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = Client().post(f"/api/jobs/{failed.pk}/retry", **_bearer(_token(alice)))
    assert response.status_code == 201
    assert len(callbacks) == 1
    retry = Job.objects.get(retry_of=failed)
    assert response.json()["id"] == retry.pk
    assert response.json()["retry_of"] == failed.pk
    assert (retry.state, retry.created_by) == (Job.State.QUEUED, alice)


def test_it_answers_409_when_retrying_a_succeeded_job(project: Project, alice: Any) -> None:
    done = _job(project, state=Job.State.SUCCEEDED)
    response = Client().post(f"/api/jobs/{done.pk}/retry", **_bearer(_token(alice)))
    assert response.status_code == 409
    assert "only failed or cancelled jobs retry" in response.json()["detail"]
    assert not Job.objects.filter(retry_of=done).exists()


def test_it_cancels_a_queued_job_with_a_token(project: Project, alice: Any) -> None:
    job = _job(project)
    response = Client().post(f"/api/jobs/{job.pk}/cancel", **_bearer(_token(alice)))
    assert response.status_code == 200
    assert response.json()["state"] == "cancelled"
    job.refresh_from_db()
    assert job.state == Job.State.CANCELLED


def test_it_answers_409_when_cancelling_a_finished_job(project: Project, alice: Any) -> None:
    job = _job(project, state=Job.State.FAILED)
    response = Client().post(f"/api/jobs/{job.pk}/cancel", **_bearer(_token(alice)))
    assert response.status_code == 409
    job.refresh_from_db()
    assert job.state == Job.State.FAILED


# CSRF ----------------------------------------------------------------------------------


def test_it_rejects_a_session_post_without_a_csrf_token(project: Project, alice: Any) -> None:
    failed = _job(project, state=Job.State.FAILED)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(f"/api/jobs/{failed.pk}/retry")
    assert response.status_code == 403
    assert not Job.objects.filter(retry_of=failed).exists()


def test_it_accepts_a_session_post_with_a_csrf_token(
    project: Project, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    failed = _job(project, state=Job.State.FAILED)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get(reverse("home"))  # sets the csrftoken cookie
    csrf = client.cookies["csrftoken"].value
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(f"/api/jobs/{failed.pk}/retry", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 201
    assert Job.objects.filter(retry_of=failed).exists()


def test_it_needs_no_csrf_token_with_a_bearer_token(
    project: Project, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    failed = _job(project, state=Job.State.FAILED)
    with django_capture_on_commit_callbacks(execute=False):
        response = Client(enforce_csrf_checks=True).post(
            f"/api/jobs/{failed.pk}/retry", **_bearer(_token(alice))
        )
    assert response.status_code == 201
    assert Job.objects.filter(retry_of=failed).exists()


# Request size --------------------------------------------------------------------------


def _oversized_recipe(size: int) -> str:
    return json.dumps({"name": "Huge", "spec": {"segment_lists": ["balanced"]}, "pad": "x" * size})


def test_it_answers_413_with_json_to_a_body_over_the_limit(
    project: Project, alice: Any, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = Client().put(
        "/api/projects/sounds/recipes/huge",
        _oversized_recipe(10_000),
        content_type="application/json",
        **_bearer(_token(alice)),
    )
    assert response.status_code == 413
    assert response.json() == {
        "detail": "The request body is larger than 4,096 bytes (the server's UPLOAD_MAX_BYTES); "
        "send less at a time."
    }
    assert not project.recipes.exists()


def test_it_answers_413_to_a_session_too(project: Project, alice: Any, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get(reverse("home"))  # sets the csrftoken cookie
    response = client.put(
        "/api/projects/sounds/recipes/huge",
        _oversized_recipe(10_000),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value,
    )
    assert response.status_code == 413
    assert "larger than 4,096 bytes" in response.json()["detail"]
    assert not project.recipes.exists()


# /account/tokens/ ----------------------------------------------------------------------


def _create_token_on_page(client: Client) -> tuple[Any, str]:
    response = client.post(reverse("token_list"), {"name": "laptop"})
    match = re.search(rb'value="(emk_[^"]+)" data-testid="new-token"', response.content)
    assert match, "the new key is not on the page"
    return response, match.group(1).decode()


def test_it_shows_a_new_raw_key_on_the_tokens_page(alice: Any) -> None:
    response, raw = _create_token_on_page(login(alice))
    assert response.status_code == 200
    assert len(raw) > 30


def test_it_shows_the_raw_key_only_once(alice: Any) -> None:
    client = login(alice)
    _, raw = _create_token_on_page(client)
    response = client.get(reverse("token_list"))
    assert response.status_code == 200
    assert raw.encode() not in response.content
    assert raw[:10].encode() in response.content  # the hint tells tokens apart


def test_it_stores_only_the_hash_of_the_key(alice: Any) -> None:
    _, raw = _create_token_on_page(login(alice))
    token = ApiToken.objects.get(user=alice)
    assert token.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    stored = [str(value) for value in ApiToken.objects.filter(pk=token.pk).values().get().values()]
    assert all(raw not in value for value in stored)


def test_it_accepts_the_key_shown_on_the_tokens_page(project: Project, alice: Any) -> None:
    _, raw = _create_token_on_page(login(alice))
    response = Client().get("/api/projects/", **_bearer(raw))
    assert response.status_code == 200


def test_it_rejects_a_key_revoked_on_the_tokens_page(project: Project, alice: Any) -> None:
    client = login(alice)
    _, raw = _create_token_on_page(client)
    token = ApiToken.objects.get(user=alice)
    response = client.post(reverse("token_revoke", args=[token.pk]))
    assert response.status_code == 302
    assert Client().get("/api/projects/", **_bearer(raw)).status_code == 401


def test_the_tokens_page_creates_an_expiring_read_only_token(project: Project, alice: Any) -> None:
    client = login(alice)
    body = {"name": "exports", "expires_in_days": "30", "read_only": "on"}
    response = client.post(reverse("token_list"), body)
    assert response.status_code == 200
    token = ApiToken.objects.get(user=alice)
    assert token.read_only
    assert token.expires_at is not None
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    page = client.get(reverse("token_list")).content.decode()
    assert 'data-testid="token-access">read-only<' in page
    assert f'data-testid="token-expires">{token.expires_at:%Y-%m-%d}' in page


def test_the_tokens_page_shows_a_full_token_that_never_expires(alice: Any) -> None:
    client = login(alice)
    _create_token_on_page(client)
    page = client.get(reverse("token_list")).content.decode()
    assert 'data-testid="token-access">read and write<' in page
    assert 'data-testid="token-expires">never<' in page
