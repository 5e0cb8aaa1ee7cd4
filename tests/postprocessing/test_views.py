"""The post-processing pages: who sees them, the revert button, CSRF."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Caption
from core.models import Job, Project
from postprocessing import services
from postprocessing.models import ProcessedCaption
from tests.conftest import login
from tests.postprocessing.conftest import MakeCaption
from tests.postprocessing.lt_server import FakeLanguageTool

pytestmark = pytest.mark.django_db


@pytest.fixture
def corrected(approved: MakeCaption, lt_server: FakeLanguageTool) -> Caption:
    caption = approved("A owl hoots 3 times.")
    services.captions_postprocess(caption_ids=[caption.pk])
    return caption


def _detail(caption: Caption, slug: str = "sounds") -> str:
    return reverse("caption_processing", args=[slug, caption.pk])


def _revert(caption: Caption, slug: str = "sounds") -> str:
    return reverse("caption_grammar_revert", args=[slug, caption.pk])


@pytest.mark.parametrize("who", ["rey", "alice"])
def test_reviewers_and_researchers_see_each_step(
    corrected: Caption, who: str, request: Any
) -> None:
    response = login(request.getfixturevalue(who)).get(_detail(corrected))
    assert response.status_code == 200
    page = response.content.decode()
    assert "A owl hoots 3 times." in page  # raw
    assert "An owl hoots three times" in page  # final
    assert "Numbers to words (num2words)" in page
    assert "EN_A_VS_AN" in page
    assert 'data-testid="revert-grammar"' in page


def test_the_partial_renders_alone(corrected: Caption, rey: Any) -> None:
    response = login(rey).get(_detail(corrected) + "?partial=1")
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert b'data-testid="steps"' in response.content


def test_a_skipped_grammar_step_shows_its_reason(approved: MakeCaption, rey: Any) -> None:
    caption = approved("A owl hoots.")
    services.captions_postprocess(caption_ids=[caption.pk])
    page = login(rey).get(_detail(caption)).content.decode()
    assert "LANGUAGETOOL_URL and LTP_JAR_DIR_PATH are not set" in page
    assert 'data-testid="revert-grammar"' not in page


def test_an_unprocessed_caption_says_so(approved: MakeCaption, rey: Any) -> None:
    page = login(rey).get(_detail(approved("A dog barks"))).content.decode()
    assert "Not post-processed yet" in page


def test_annotators_may_not_look(corrected: Caption, ann: Any) -> None:
    assert login(ann).get(_detail(corrected)).status_code == 403
    assert login(ann).get(reverse("postprocessing_overview", args=["sounds"])).status_code == 403


def test_outsiders_do_not_learn_the_project_exists(corrected: Caption, olive: Any) -> None:
    assert login(olive).get(_detail(corrected)).status_code == 404
    assert login(olive).post(_revert(corrected)).status_code == 404


def test_a_caption_of_another_project_is_not_found_through_mine(
    imported: MakeCaption, corrected: Caption, olive: Any
) -> None:
    birds_caption = imported("a bird sings", into=Project.objects.get(slug="birds"))
    assert login(olive).get(_detail(birds_caption, "birds")).status_code == 200
    assert login(olive).get(_detail(corrected, "birds")).status_code == 404


def test_anonymous_visitors_are_sent_to_log_in(corrected: Caption) -> None:
    response = Client().get(_detail(corrected))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_reviewer_reverts_the_grammar_correction(corrected: Caption, rey: Any) -> None:
    response = login(rey).post(_revert(corrected))
    assert response.status_code == 302
    assert response["Location"] == _detail(corrected)
    processed = ProcessedCaption.objects.get(caption=corrected)
    assert processed.final_text == "A owl hoots three times"
    assert processed.grammar_reverted
    page = login(rey).get(_detail(corrected)).content.decode()
    assert "Reverted by rey" in page


def test_annotators_cannot_revert(corrected: Caption, ann: Any) -> None:
    assert login(ann).post(_revert(corrected)).status_code == 403
    assert not ProcessedCaption.objects.get(caption=corrected).grammar_reverted


def test_revert_needs_post(corrected: Caption, rey: Any) -> None:
    assert login(rey).get(_revert(corrected)).status_code == 405


def test_revert_needs_the_csrf_token(corrected: Caption, rey: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(rey)
    assert client.post(_revert(corrected)).status_code == 403
    assert not ProcessedCaption.objects.get(caption=corrected).grammar_reverted


def test_reverting_an_unprocessed_caption_says_why(approved: MakeCaption, rey: Any) -> None:
    caption = approved("A dog barks")
    response = login(rey).post(_revert(caption), follow=True)
    assert "has not been post-processed yet" in response.content.decode()


def test_the_overview_lists_corrections(corrected: Caption, rey: Any) -> None:
    response = login(rey).get(reverse("postprocessing_overview", args=["sounds"]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "An owl hoots three times" in page
    assert _detail(corrected) in page
    assert "Post-process waiting captions" not in page  # researchers only


def test_researchers_start_postprocessing_as_a_job(
    approved: MakeCaption, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    approved("A dog barks")
    url = reverse("postprocessing_run", args=["sounds"])
    with django_capture_on_commit_callbacks(execute=False):
        response = login(alice).post(url, {"what": "captions"})
    assert response.status_code == 302
    job = Job.objects.get()
    assert (job.kind, job.queue, job.params) == (
        "captions_postprocess",
        "text",
        {"project_id": Project.objects.get(slug="sounds").pk},
    )


def test_reviewers_cannot_start_jobs(rey: Any, project: Project) -> None:
    url = reverse("postprocessing_run", args=["sounds"])
    assert login(rey).post(url, {"what": "vocabulary"}).status_code == 403
    assert not Job.objects.exists()
