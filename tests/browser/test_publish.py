"""A researcher publishes a batch on a crowd platform from its page, in a real browser:
the "Publish on Prolific" button queues the publish job and leads to its page, and a batch
paying under Prolific's hourly minimum is refused on the page with the reason (the fake
Prolific of tests/annotation/prolific_fake.py serves the API)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Batch
from annotation.platforms.prolific.client import study_id
from core.models import Job, Project
from core.services import job_run
from tests.annotation.conftest import prolific_ready
from tests.annotation.factories import make_clips, make_subset, publish
from tests.annotation.prolific_fake import FakeProlific, prolific_configured
from tests.browser.conftest import CHROMIUM, CHROMIUM_MISSING
from tests.browser.test_roles import log_in

if not CHROMIUM.exists():
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("page_fails_fast")]


@pytest.fixture
def prolific(settings: Any) -> Iterator[FakeProlific]:
    with prolific_configured(settings) as fake:
        yield fake


def _batch(project: Project, **ready: int) -> Batch:
    return prolific_ready(publish(make_subset(project, make_clips(2))), **ready)


def _open(page: Page, site: str, batch: Batch) -> None:
    log_in(page, site, "alice")
    page.goto(f"{site}{batch.get_absolute_url()}")


def test_a_researcher_publishes_a_batch_on_prolific_from_its_page(
    page: Page,
    live_server: Any,
    project: Project,
    alice: Any,
    prolific: FakeProlific,
    sent_tasks: list[int],
) -> None:
    batch = _batch(project)
    _open(page, live_server.url, batch)

    page.get_by_role("button", name="Publish on Prolific").click()

    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    job = Job.objects.get()
    assert page.url == f"{live_server.url}{job.get_absolute_url()}"
    expect(page.locator(".flash.success")).to_contain_text(
        f"Publishing {batch.name} as job #{job.pk}"
    )
    assert sent_tasks == [job.pk]
    assert job_run(job_id=job.pk).state == Job.State.SUCCEEDED  # what the worker does
    page.reload()
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded")
    batch.refresh_from_db()
    assert prolific.studies[study_id(batch)]["status"] == "ACTIVE"
    page.goto(f"{live_server.url}{batch.get_absolute_url()}")
    expect(page.get_by_role("button", name="Publish again on Prolific")).to_be_visible()


def test_a_batch_under_the_hourly_minimum_is_refused_on_its_page(
    page: Page,
    live_server: Any,
    project: Project,
    alice: Any,
    prolific: FakeProlific,
    sent_tasks: list[int],
) -> None:
    batch = _batch(project, reward_cents=10, minutes=5)
    _open(page, live_server.url, batch)

    page.get_by_role("button", name="Publish on Prolific").click()

    expect(page).to_have_url(f"{live_server.url}{batch.get_absolute_url()}")
    expect(page.get_by_role("alert")).to_contain_text("below Prolific's minimum")
    assert not sent_tasks
    assert not prolific.studies
