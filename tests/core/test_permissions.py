"""Who may see and do what, on every URL of core.urls and on /api/.

Anonymous visitors are sent to log in (401 on /api/). Olive, a researcher elsewhere,
must not learn that Alice's project or jobs exist (404). Annotators and reviewers see
their project but not its jobs (403); only researchers see invites.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, reverse

from core import urls as core_urls
from core.models import ApiToken, Invite, Job, Project, WorkerHeartbeat
from core.services import api_token_create, invite_create, job_create
from tests.conftest import login, make_user


@dataclass
class World:
    project: Project
    job: Job
    invite: Invite
    token: ApiToken


@pytest.fixture
def world(project: Project, alice: Any) -> World:
    job = job_create(
        kind="ontology_import", params={"path": "x"}, project=project, created_by=alice
    )
    invite = invite_create(project=project, created_by=alice)
    token, _ = api_token_create(user=alice, name="laptop")
    return World(project=project, job=job, invite=invite, token=token)


URL = Callable[[World], str]

# Pages behind login, by URL name. Every name in core.urls appears here or in PUBLIC.
LOGIN_REQUIRED: dict[str, URL] = {
    "home": lambda w: reverse("home"),
    "account": lambda w: reverse("account"),
    "project_new": lambda w: reverse("project_new"),
    "project_detail": lambda w: reverse("project_detail", args=[w.project.slug]),
    "invite_new": lambda w: reverse("invite_new", args=[w.project.slug]),
    "invite_revoke": lambda w: reverse("invite_revoke", args=[w.project.slug, w.invite.pk]),
    "job_list": lambda w: reverse("job_list"),
    "job_detail": lambda w: reverse("job_detail", args=[w.job.pk]),
    "job_retry": lambda w: reverse("job_retry", args=[w.job.pk]),
    "job_cancel": lambda w: reverse("job_cancel", args=[w.job.pk]),
    "token_list": lambda w: reverse("token_list"),
    "token_revoke": lambda w: reverse("token_revoke", args=[w.token.pk]),
}
POST_ONLY = ["invite_new", "invite_revoke", "job_retry", "job_cancel", "token_revoke"]
PUBLIC: dict[str, URL] = {
    "invite_accept": lambda w: reverse("invite_accept", args=[w.invite.token]),
    "healthz": lambda w: reverse("healthz"),
}

# Alice's project and job, as Olive (a researcher elsewhere) would try them.
OUTSIDER_PAGES: list[tuple[str, str]] = [
    ("get", "project_detail"),
    ("post", "invite_new"),
    ("post", "invite_revoke"),
    ("get", "job_detail"),
    ("post", "job_retry"),
    ("post", "job_cancel"),
]
# Job pages an annotator or reviewer of the project must not open.
JOB_PAGES: list[tuple[str, str]] = [
    ("get", "job_list"),
    ("get", "job_detail"),
    ("post", "job_retry"),
    ("post", "job_cancel"),
]
API: list[tuple[str, Callable[[World], str]]] = [
    ("get", lambda w: "/api/projects/"),
    ("get", lambda w: f"/api/projects/{w.project.slug}"),
    ("get", lambda w: "/api/jobs/"),
    ("get", lambda w: f"/api/jobs/{w.job.pk}"),
    ("post", lambda w: f"/api/jobs/{w.job.pk}/retry"),
    ("post", lambda w: f"/api/jobs/{w.job.pk}/cancel"),
]
API_IDS = [
    "GET projects",
    "GET project",
    "GET jobs",
    "GET job",
    "POST job retry",
    "POST job cancel",
]


def _unchanged(world: World) -> bool:
    """Nothing the POST-only URLs could have done has happened."""
    world.job.refresh_from_db()
    world.invite.refresh_from_db()
    world.token.refresh_from_db()
    return (
        Job.objects.count() == 1
        and world.job.state == Job.State.QUEUED
        and not world.job.cancel_requested
        and Invite.objects.count() == 1
        and world.invite.revoked_at is None
        and world.token.revoked_at is None
    )


def _request(client: Client, method: str, url: str) -> Any:
    return getattr(client, method)(url)


# Coverage of the URL table -------------------------------------------------------------


def test_it_covers_every_url_in_core_urls() -> None:
    names = {p.name for p in core_urls.urlpatterns if isinstance(p, URLPattern)}
    assert names == set(LOGIN_REQUIRED) | set(PUBLIC)


# Anonymous -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(LOGIN_REQUIRED))
def test_it_redirects_anonymous_visitors_to_login(world: World, name: str) -> None:
    url = LOGIN_REQUIRED[name](world)
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.parametrize("name", POST_ONLY)
def test_it_redirects_anonymous_posts_to_login_without_acting(world: World, name: str) -> None:
    response = Client().post(LOGIN_REQUIRED[name](world))
    assert response.status_code == 302
    assert response["Location"].startswith(f"{reverse('login')}?next=")
    assert _unchanged(world)


def test_it_shows_invite_links_to_anonymous_visitors(world: World) -> None:
    response = Client().get(PUBLIC["invite_accept"](world))
    assert response.status_code == 200
    assert b"Create account and join" in response.content


def test_it_serves_healthz_to_anonymous_visitors(world: World) -> None:
    WorkerHeartbeat.objects.create(hostname="celery@perm", queues="default,gpu,media,text", pid=1)
    response = Client().get(PUBLIC["healthz"](world))
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


@pytest.mark.parametrize(("method", "url"), API, ids=API_IDS)
def test_it_answers_anonymous_api_calls_with_401(world: World, method: str, url: URL) -> None:
    response = _request(Client(), method, url(world))
    assert response.status_code == 401
    assert _unchanged(world)


# Olive, the outsider -------------------------------------------------------------------


@pytest.mark.parametrize(("method", "name"), OUTSIDER_PAGES, ids=[n for _, n in OUTSIDER_PAGES])
def test_it_hides_alices_project_from_olive(
    world: World, olive: Any, method: str, name: str
) -> None:
    response = _request(login(olive), method, LOGIN_REQUIRED[name](world))
    assert response.status_code == 404
    assert _unchanged(world)


def test_it_leaves_alices_jobs_off_olives_job_list(world: World, olive: Any) -> None:
    response = login(olive).get(reverse("job_list"))
    assert response.status_code == 200
    assert f'data-job="{world.job.pk}"'.encode() not in response.content


def test_it_lets_olive_open_her_own_project(world: World, olive: Any) -> None:
    response = login(olive).get(reverse("project_detail", args=["birds"]))
    assert response.status_code == 200
    assert b"Olive&#x27;s birds" in response.content


def test_it_hides_alices_token_from_olive(world: World, olive: Any) -> None:
    response = login(olive).post(LOGIN_REQUIRED["token_revoke"](world))
    assert response.status_code == 404
    assert _unchanged(world)


@pytest.mark.parametrize(
    "url",
    [lambda w: f"/api/projects/{w.project.slug}", lambda w: f"/api/jobs/{w.job.pk}"],
    ids=["project", "job"],
)
def test_it_hides_alices_project_and_jobs_from_olive_on_the_api(
    world: World, olive: Any, url: URL
) -> None:
    response = login(olive).get(url(world))
    assert response.status_code == 404


def test_it_forbids_the_jobs_list_to_a_user_in_no_project(world: World) -> None:
    response = login(make_user("newcomer")).get(reverse("job_list"))
    assert response.status_code == 403


# Annotators and reviewers: members who do not run the project --------------------------


@pytest.mark.parametrize("persona", ["ann", "rey"])
@pytest.mark.parametrize(("method", "name"), JOB_PAGES, ids=[n for _, n in JOB_PAGES])
def test_it_forbids_job_pages_to_annotators_and_reviewers(
    world: World, request: pytest.FixtureRequest, persona: str, method: str, name: str
) -> None:
    client = login(request.getfixturevalue(persona))
    response = _request(client, method, LOGIN_REQUIRED[name](world))
    assert response.status_code == 403
    assert _unchanged(world)


@pytest.mark.parametrize("persona", ["ann", "rey"])
def test_it_hides_invites_from_annotators_and_reviewers(
    world: World, request: pytest.FixtureRequest, persona: str
) -> None:
    client = login(request.getfixturevalue(persona))
    response = client.get(LOGIN_REQUIRED["project_detail"](world))
    assert response.status_code == 200
    assert b"Invite links" not in response.content
    assert world.invite.token.encode() not in response.content


# Annotators ----------------------------------------------------------------------------


def test_it_shows_annotators_their_project(world: World, ann: Any) -> None:
    response = login(ann).get(LOGIN_REQUIRED["project_detail"](world))
    assert response.status_code == 200
    assert b"Everyday sounds" in response.content


def test_it_hides_members_from_annotators(world: World, ann: Any) -> None:
    response = login(ann).get(LOGIN_REQUIRED["project_detail"](world))
    assert response.status_code == 200
    assert b'data-testid="members"' not in response.content
    assert b"<td>abe</td>" not in response.content


def test_it_hides_recent_jobs_from_annotators(world: World, ann: Any) -> None:
    response = login(ann).get(LOGIN_REQUIRED["project_detail"](world))
    assert response.status_code == 200
    assert b'data-testid="jobs"' not in response.content


@pytest.mark.parametrize(("method", "name"), [("post", "invite_new"), ("post", "invite_revoke")])
def test_it_forbids_invite_management_to_annotators(
    world: World, ann: Any, method: str, name: str
) -> None:
    response = _request(login(ann), method, LOGIN_REQUIRED[name](world))
    assert response.status_code == 403
    assert _unchanged(world)


def test_it_forbids_project_creation_to_annotators(world: World, ann: Any) -> None:
    response = login(ann).post(reverse("project_new"), {"name": "Ann's own"})
    assert response.status_code == 403
    assert not Project.objects.filter(name="Ann's own").exists()


def test_it_lets_annotators_manage_their_own_tokens(world: World, ann: Any) -> None:
    response = login(ann).get(reverse("token_list"))
    assert response.status_code == 200


def test_it_gives_annotators_no_jobs_on_the_api(world: World, ann: Any) -> None:
    response = login(ann).get("/api/jobs/")
    assert response.status_code == 200
    assert response.json() == []


# Reviewers -----------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["rey", "alice"])
def test_it_shows_members_to_reviewers_and_researchers(
    world: World, request: pytest.FixtureRequest, persona: str
) -> None:
    response = login(request.getfixturevalue(persona)).get(LOGIN_REQUIRED["project_detail"](world))
    assert response.status_code == 200
    assert b'data-testid="members"' in response.content
    assert b"<td>ann</td>" in response.content
    assert b"<td>abe</td>" in response.content


def test_it_forbids_invite_creation_to_reviewers(world: World, rey: Any) -> None:
    response = login(rey).post(LOGIN_REQUIRED["invite_new"](world), {"role": "annotator"})
    assert response.status_code == 403
    assert _unchanged(world)


# Researchers ---------------------------------------------------------------------------


def test_it_shows_invites_to_researchers(world: World, alice: Any) -> None:
    response = login(alice).get(LOGIN_REQUIRED["project_detail"](world))
    assert response.status_code == 200
    assert world.invite.token.encode() in response.content


def test_it_shows_recent_jobs_to_researchers(world: World, alice: Any) -> None:
    response = login(alice).get(LOGIN_REQUIRED["project_detail"](world))
    assert response.status_code == 200
    assert f'data-job="{world.job.pk}"'.encode() in response.content


@pytest.mark.parametrize("name", ["job_list", "job_detail", "project_new", "token_list", "home"])
def test_it_opens_pages_to_researchers(world: World, alice: Any, name: str) -> None:
    response = login(alice).get(LOGIN_REQUIRED[name](world))
    assert response.status_code == 200


def test_it_lists_the_projects_job_for_researchers(world: World, alice: Any) -> None:
    response = login(alice).get(reverse("job_list"))
    assert response.status_code == 200
    assert f'data-job="{world.job.pk}"'.encode() in response.content


def test_it_lets_researchers_cancel_a_job(world: World, alice: Any) -> None:
    response = login(alice).post(LOGIN_REQUIRED["job_cancel"](world))
    assert response.status_code == 302
    world.job.refresh_from_db()
    assert world.job.state == Job.State.CANCELLED


def test_it_lets_researchers_revoke_an_invite(world: World, alice: Any) -> None:
    response = login(alice).post(LOGIN_REQUIRED["invite_revoke"](world))
    assert response.status_code == 302
    world.invite.refresh_from_db()
    assert world.invite.revoked_at is not None


def test_it_lets_users_revoke_their_own_token(world: World, alice: Any) -> None:
    response = login(alice).post(LOGIN_REQUIRED["token_revoke"](world))
    assert response.status_code == 302
    world.token.refresh_from_db()
    assert world.token.revoked_at is not None


@pytest.mark.parametrize("name", POST_ONLY)
def test_it_refuses_get_on_post_only_urls(world: World, alice: Any, name: str) -> None:
    response = login(alice).get(LOGIN_REQUIRED[name](world))
    assert response.status_code == 405
    assert _unchanged(world)


def test_it_shows_staff_every_project(world: World, staff: Any) -> None:
    response = login(staff).get(LOGIN_REQUIRED["project_detail"](world))
    assert response.status_code == 200
    assert world.invite.token.encode() in response.content


# Site-wide jobs (ontology and segment imports): staff only -----------------------------


@pytest.fixture
def site_wide_job(db: None) -> Job:
    job = job_create(kind="segments_import", params={"path": "/srv/private/eval.csv"})
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.FAILED, finished_at=job.created_at, error="boom"
    )
    return job


@pytest.mark.parametrize(
    ("method", "name"), [("get", "job_detail"), ("post", "job_retry"), ("post", "job_cancel")]
)
def test_it_keeps_site_wide_jobs_from_researchers(
    project: Project, alice: Any, site_wide_job: Job, method: str, name: str
) -> None:
    response = _request(login(alice), method, reverse(name, args=[site_wide_job.pk]))
    assert response.status_code == 404
    assert not Job.objects.filter(retry_of=site_wide_job).exists()


def test_it_leaves_site_wide_jobs_off_a_researchers_job_list(
    project: Project, alice: Any, site_wide_job: Job
) -> None:
    response = login(alice).get(reverse("job_list"))
    assert response.status_code == 200
    assert b"/srv/private" not in response.content
    assert f'data-job="{site_wide_job.pk}"'.encode() not in response.content


def test_it_shows_site_wide_jobs_to_staff(staff: Any, site_wide_job: Job) -> None:
    response = login(staff).get(reverse("job_list"))
    assert f'data-job="{site_wide_job.pk}"'.encode() in response.content
