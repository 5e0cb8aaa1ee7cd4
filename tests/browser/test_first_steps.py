"""A newcomer's first steps in a real browser (issue 31): an annotator lands on their work,
and a researcher's first export of a project with local clips goes through on the form's
defaults."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from core.models import Project
from corpus.models import Snapshot
from corpus.services import captions_import
from tests.browser.conftest import CHROMIUM, CHROMIUM_MISSING
from tests.browser.test_roles import log_in
from tests.corpus.conftest import CLOTHO

if not CHROMIUM.exists():
    pytest.skip(CHROMIUM_MISSING, allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("page_fails_fast")]


def test_an_annotator_lands_on_work_without_api_links(
    page: Page, live_server: Any, project: Project, ann: Any
) -> None:
    log_in(page, live_server.url, "ann")

    assert page.url == f"{live_server.url}/work/"
    main_nav = page.get_by_role("navigation", name="Main")
    expect(main_nav.get_by_role("link", name="API tokens")).to_have_count(0)
    expect(main_nav.get_by_role("link", name="API docs")).to_have_count(0)


def test_the_first_export_goes_through_on_the_forms_defaults(
    page: Page,
    live_server: Any,
    project: Project,
    alice: Any,
    sent_tasks: list[int],
) -> None:
    # the demo's case: approved captions on local clips, which AudioCaps CSV cannot name
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")
    log_in(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/projects/{project.slug}/snapshots/")

    form = page.get_by_test_id("snapshot-form")
    form.get_by_role("button", name="Export").click()

    expect(page.get_by_role("alert")).to_have_count(0)
    snapshot = Snapshot.objects.get()
    assert snapshot.format == Snapshot.Format.CLOTHO
    assert page.url == f"{live_server.url}{snapshot.get_absolute_url()}"
    assert sent_tasks == [snapshot.job_id]
