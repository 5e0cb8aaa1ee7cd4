"""Who may see and do what on the active-learning pages and API: an outsider gets 404, an
annotator 403, a reviewer reads, a researcher acts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from active.models import BatchConfig, CurvePoint, PromotionDecision, Retrain
from annotation.models import Batch
from core.models import Job
from core.services import api_token_create
from curation.models import Clip
from modeling.models import TrainingRun
from tests.active.conftest import suggest
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _pages(batch: Batch, run: TrainingRun) -> dict[str, tuple[str, str]]:
    s = batch.project.slug
    return {
        "loop": ("get", f"/projects/{s}/active/"),
        "curve": ("get", f"/projects/{s}/active/curve/"),
        "retrain": ("post", f"/projects/{s}/active/retrain/"),
        "promote": ("post", f"/projects/{s}/active/runs/{run.pk}/promote-if-better/"),
        "configure": ("post", f"/projects/{s}/batches/{batch.pk}/active/"),
        "flag": ("post", f"/projects/{s}/batches/{batch.pk}/active/flag/"),
        "refit": ("post", f"/projects/{s}/active/flags/refit/"),
        "api_batch": ("get", f"/api/projects/{s}/batches/{batch.pk}/active"),
        "api_decisions": ("get", f"/api/projects/{s}/active/decisions"),
        "api_curve": ("get", f"/api/projects/{s}/active/curve"),
    }


READ_ONLY = {"loop", "curve", "flag", "api_batch", "api_decisions", "api_curve"}


@pytest.mark.parametrize(
    "name",
    ["loop", "curve", "retrain", "promote", "configure", "flag", "refit", "api_batch",
     "api_decisions", "api_curve"],
)  # fmt: skip
def test_who_may_use_each_url(
    name: str, batch: Batch, promoted: TrainingRun, olive: Any, ann: Any, rey: Any
) -> None:
    method, url = _pages(batch, promoted)[name]
    data = {"strategy": "random", "presuggest": "blind"}

    def status(user: Any) -> int:
        client = login(user)
        return (client.get(url) if method == "get" else client.post(url, data)).status_code

    assert status(olive) == 404
    assert status(ann) == 403
    assert status(rey) in ((200, 302) if name in READ_ONLY else (403,))
    anonymous = Client()
    got = anonymous.get(url) if method == "get" else anonymous.post(url, data)
    assert got.status_code in (302, 401)


def test_the_batch_page_shows_the_strategy_and_scores(
    batch: Batch, alice: Any, promoted: TrainingRun
) -> None:
    client = login(alice)
    response = client.post(
        f"/projects/sounds/batches/{batch.pk}/active/",
        {"strategy": "uncertainty", "presuggest": "edit", "seed": "4"},
    )
    assert response.status_code == 302
    config = BatchConfig.objects.get(batch=batch)
    assert (config.strategy, config.presuggest, config.seed) == ("uncertainty", "edit", 4)
    page = client.get(batch.get_absolute_url()).content.decode()
    assert "Uncertainty (mean token entropy)" in page
    assert 'data-testid="clip-scores"' in page
    assert "no caption checked yet" in page


def test_a_bad_strategy_is_refused_with_a_message(batch: Batch, alice: Any) -> None:
    response = login(alice).post(
        f"/projects/sounds/batches/{batch.pk}/active/",
        {"strategy": "loudest", "presuggest": "blind"},
        follow=True,
    )
    assert "strategy" in response.content.decode()
    assert not BatchConfig.objects.filter(batch=batch).exists()


def test_the_loop_page_lists_decisions_and_starts_a_retrain(
    project: Any, promoted: TrainingRun, alice: Any
) -> None:
    client = login(alice)
    client.post(f"/projects/sounds/active/runs/{promoted.pk}/promote-if-better/")
    assert PromotionDecision.objects.get().reason == "This run already suggests captions."
    client.post("/projects/sounds/active/retrain/")
    job = Retrain.objects.get().job
    assert job is not None
    assert job.kind == "active_retrain"
    page = client.get("/projects/sounds/active/").content.decode()
    assert "This run already suggests captions." in page
    assert "/labelstudio/sounds" in page


def test_the_loop_page_lists_the_suggesting_runs_suggestions_least_certain_first(
    clips: list[Clip], promoted: TrainingRun, rey: Any
) -> None:
    suggest(promoted, clips[0], "a dog barks twice", entropy=0.4)
    suggest(promoted, clips[1], "rain &lt;b&gt; falls", entropy=1.7)

    page = login(rey).get("/projects/sounds/active/").content.decode()

    table = page[page.index('data-testid="suggestions"') :]
    assert "2 clips captioned by run #" in page
    assert table.index("rain &amp;lt;b&amp;gt; falls") < table.index("a dog barks twice")


def test_the_loop_page_says_why_there_are_no_suggestions_yet(project: Any, alice: Any) -> None:
    page = login(alice).get("/projects/sounds/active/").content.decode()

    assert "No suggestions yet: promote a finished run" in page


def test_retrain_now_links_its_job(project: Any, alice: Any) -> None:
    response = login(alice).post("/projects/sounds/active/retrain/", follow=True)

    job = Retrain.objects.get().job
    assert job is not None
    assert f'as <a href="/jobs/{job.pk}/">job #{job.pk}</a>.' in response.content.decode()


def test_a_reviewer_who_sees_no_job_pages_gets_the_jobs_number(batch: Batch, rey: Any) -> None:
    response = login(rey).post(f"/projects/sounds/batches/{batch.pk}/active/flag/", follow=True)

    job = Job.objects.get(kind="batch_flag")
    page = response.content.decode()
    assert f"Checking the batch&#x27;s captions as job #{job.pk}." in page
    assert f"/jobs/{job.pk}/" not in page


@pytest.mark.parametrize("page", ["/projects/sounds/", "/projects/sounds/runs/"])
def test_active_learning_is_linked_from_the_hub_and_the_modeling_nav(
    project: Any, rey: Any, page: str
) -> None:
    html = login(rey).get(page).content.decode()

    assert '<a href="/projects/sounds/active/"' in html


def test_the_flag_button_queues_a_check(batch: Batch, rey: Any) -> None:
    login(rey).post(f"/projects/sounds/batches/{batch.pk}/active/flag/")
    assert Job.objects.get(kind="batch_flag").params == {"batch_id": batch.pk}


def test_curves_import_and_show(project: Any, alice: Any) -> None:
    _, raw = api_token_create(user=alice, name="script")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    body = {"label": "sim", "curves": {"random": [{"round": 0, "captions": 80, "value": 0.4}],
                                       "committee": [{"captions": 80, "value": 0.5}]}}  # fmt: skip
    response = client.post("/api/projects/sounds/active/curve", json.dumps(body),
                           content_type="application/json")  # fmt: skip
    assert response.status_code == 201
    assert response.json() == {"points": 2}
    assert CurvePoint.objects.filter(source="simulation").count() == 2
    series = client.get("/api/projects/sounds/active/curve").json()
    assert [s["strategy"] for s in series] == ["committee", "random"]
    page = login(alice).get("/projects/sounds/active/curve/").content.decode()
    assert "<svg" in page
    assert "sim: committee" in page
    bad = client.post("/api/projects/sounds/active/curve",
                      json.dumps({"label": "x", "curves": {"loudest": []}}),
                      content_type="application/json")  # fmt: skip
    assert bad.status_code == 400
    assert "loudest" in bad.json()["detail"]


def test_the_loop_page_plots_the_flags_against_reviews_and_refits_them_on_demand(
    project: Any, alice: Any
) -> None:
    from active.models import FlagCalibration
    from core.models import Job

    client = login(alice)
    page = client.get("/projects/sounds/active/").content.decode()
    assert "No refit yet" in page
    client.post("/projects/sounds/active/flags/refit/")
    job = Job.objects.get(kind="flags_calibrate")
    assert job.params == {"project_id": project.pk}

    for decisions, flagged_bad in ((10, 2), (30, 9)):
        FlagCalibration.objects.create(
            project=project, decisions=decisions, bad=10, flagged=12, flagged_bad=flagged_bad
        )
    page = client.get("/projects/sounds/active/").content.decode()
    assert 'data-testid="flags-chart"' in page
    assert page.count('data-testid="flag-calibration"') == 2
    assert "<td>0.75</td><td>0.90</td>" in page  # the latest: 9 of 12 flagged, 9 of 10 bad
