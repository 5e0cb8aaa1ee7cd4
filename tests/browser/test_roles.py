"""What each role sees, through a real browser against the live server.

Alice researches "sounds", Rey reviews it, Ann annotates it, Olive is an outsider
(tests/conftest.py). Everyone logs in through the login form.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from core.models import Job, Membership, Project, Role
from core.services import invite_create, job_run_inline
from tests.browser.conftest import CHROMIUM, CHROMIUM_MISSING
from tests.conftest import PASSWORD

if not CHROMIUM.exists():
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

pytestmark = pytest.mark.browser

TIMEOUT_MS = 10_000


@pytest.fixture
def site(live_server: Any) -> str:
    return live_server.url


@pytest.fixture(autouse=True)
def _fail_fast(page: Page) -> None:
    page.set_default_timeout(TIMEOUT_MS)
    page.set_default_navigation_timeout(TIMEOUT_MS)


def log_in(page: Page, site: str, username: str, password: str = PASSWORD) -> None:
    page.goto(f"{site}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_test_id("username")).to_have_text(username)


def open_project(page: Page, site: str, project: Project) -> None:
    page.goto(f"{site}{project.get_absolute_url()}")
    expect(page.get_by_role("heading", level=1)).to_contain_text(project.name)


def refused(page: Page, url: str, *, status: int, heading: str) -> None:
    """Opening `url` answers `status` with the error page titled `heading`."""
    response = page.goto(url)
    assert response is not None
    assert response.status == status
    expect(page.get_by_role("heading", level=1)).to_have_text(heading)


def jobs_link(page: Page) -> Any:
    return page.get_by_role("navigation", name="Main").get_by_role("link", name="Jobs")


@pytest.fixture
def failed_job(project: Project, alice: Any, tmp_path: Path) -> Job:
    job = job_run_inline(
        kind="ontology_import",
        params={"path": str(tmp_path / "lost_ontology.json")},
        project=project,
        created_by=alice,
    )
    assert job.state == Job.State.FAILED
    return job


def test_it_shows_the_researcher_members_invites_and_jobs(
    page: Page, site: str, project: Project, alice: Any
) -> None:
    invite_create(project=project, created_by=alice)
    log_in(page, site, "alice")
    open_project(page, site, project)

    expect(jobs_link(page)).to_be_visible()
    members = page.get_by_test_id("members")
    for username in ("alice", "rey", "ann", "abe"):
        expect(members).to_contain_text(username)
    expect(page.get_by_role("heading", name="Invite links")).to_be_visible()
    expect(page.get_by_test_id("invites").get_by_label("Invite link")).to_have_value(
        re.compile(r"/invite/[\w-]+/$")
    )


def test_it_lets_the_researcher_retry_a_failed_job(
    page: Page, site: str, failed_job: Job, sent_tasks: list[int]
) -> None:
    log_in(page, site, "alice")
    jobs_link(page).click()
    row = page.locator(f'[data-testid="jobs"] tr[data-job="{failed_job.pk}"]')
    expect(row).to_have_attribute("data-state", "failed")
    expect(row).to_contain_text("lost_ontology.json")

    row.get_by_role("link", name=str(failed_job.pk), exact=True).click()
    expect(page.get_by_test_id("job-error")).to_contain_text("lost_ontology.json: no such file")
    page.get_by_role("button", name="Retry").click()

    retry = Job.objects.get(retry_of=failed_job)
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Job #{retry.pk}: {retry.label}")
    expect(page.get_by_role("link", name=f"#{failed_job.pk}")).to_be_visible()
    assert page.url == f"{site}/jobs/{retry.pk}/"
    assert retry.state == Job.State.QUEUED
    assert sent_tasks == [retry.pk]


def test_it_shows_the_reviewer_members_but_no_invites_or_jobs(
    page: Page, site: str, project: Project, alice: Any
) -> None:
    invite_create(project=project, created_by=alice)
    log_in(page, site, "rey")
    open_project(page, site, project)

    expect(page.get_by_test_id("members")).to_contain_text("ann")
    expect(page.get_by_role("heading", name="Invite links")).to_have_count(0)
    expect(page.get_by_test_id("invites")).to_have_count(0)
    expect(jobs_link(page)).to_have_count(0)


def test_it_shows_the_annotator_the_project_and_nothing_else(
    page: Page, site: str, project: Project, alice: Any
) -> None:
    invite_create(project=project, created_by=alice)
    log_in(page, site, "ann")
    open_project(page, site, project)

    expect(page.locator("h1 .badge")).to_have_text("Annotator")
    expect(page.get_by_test_id("members")).to_have_count(0)
    expect(page.get_by_test_id("invites")).to_have_count(0)
    expect(page.get_by_role("heading", name="Invite links")).to_have_count(0)
    expect(jobs_link(page)).to_have_count(0)


def test_it_forbids_the_annotator_the_jobs_page(
    page: Page, site: str, project: Project, failed_job: Job
) -> None:
    log_in(page, site, "ann")
    refused(page, f"{site}/jobs/", status=403, heading="Not allowed")

    expect(page.locator("main")).not_to_contain_text("lost_ontology.json")


def test_it_hides_the_project_from_an_outsider(
    page: Page, site: str, project: Project, olive: Any
) -> None:
    log_in(page, site, "olive")
    refused(page, f"{site}{project.get_absolute_url()}", status=404, heading="Not found")

    expect(page.locator("main")).not_to_contain_text(project.name)


def test_it_signs_up_a_visitor_through_an_invite_link_as_annotator(
    page: Page, site: str, project: Project, new_context: Any
) -> None:
    log_in(page, site, "alice")
    open_project(page, site, project)
    page.get_by_role("button", name="Create invite link").click()
    expect(page.get_by_role("status")).to_contain_text("Invite link created for annotators")
    link = page.get_by_test_id("invites").get_by_label("Invite link").first.input_value()

    visitor: BrowserContext = new_context()
    visit = visitor.new_page()
    visit.set_default_timeout(TIMEOUT_MS)
    visit.goto(link)
    expect(visit.get_by_role("heading", level=1)).to_have_text(f"Join {project.name}")
    visit.get_by_label("Username").fill("newbie")
    visit.get_by_label(re.compile(r"^Password:?$")).fill("a-long-unusual-passphrase-42")
    visit.get_by_label(re.compile(r"^Password confirmation:?$")).fill(
        "a-long-unusual-passphrase-42"
    )
    visit.get_by_label("Country you live in").select_option("NZ")
    visit.get_by_role("button", name="Create account and join").click()

    expect(visit).to_have_url(f"{site}{project.get_absolute_url()}")
    expect(visit.get_by_test_id("username")).to_have_text("newbie")
    expect(visit.locator("h1 .badge")).to_have_text("Annotator")
    expect(visit.get_by_role("status")).to_contain_text(f"Welcome to {project.name}")
    membership = Membership.objects.get(project=project, user__username="newbie")
    assert membership.role == Role.ANNOTATOR
    assert membership.invite is not None
    assert membership.user.profile.country == "NZ"
