"""Training-run pages: who may see and do what, and what each page shows.

Runs here are rows written directly (the training itself is tested in test_runs.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.models import Job, Project
from corpus.models import Snapshot
from curation.models import Subset
from modeling import planning
from modeling.models import TrainingRun
from tests.conftest import login
from tests.modeling.factories import make_run, ready_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def snapshot(project: Project) -> Snapshot:
    return ready_snapshot(project)


_run = make_run


@pytest.fixture
def run(project: Project, snapshot: Snapshot) -> TrainingRun:
    return make_run(project, snapshot)


URL = Callable[[TrainingRun], str]
PAGES: dict[str, URL] = {
    "run_list": lambda r: reverse("run_list", args=[r.project.slug]),
    "run_detail": lambda r: reverse("run_detail", args=[r.project.slug, r.pk]),
    "run_curve": lambda r: reverse("run_curve", args=[r.project.slug, r.pk]),
}
ACTIONS: dict[str, URL] = {
    "run_cancel": lambda r: reverse("run_cancel", args=[r.project.slug, r.pk]),
    "run_resume": lambda r: reverse("run_resume", args=[r.project.slug, r.pk]),
    "run_start_from": lambda r: reverse("run_start_from", args=[r.project.slug, r.pk]),
    "run_promote": lambda r: reverse("run_promote", args=[r.project.slug, r.pk]),
    "run_suggest": lambda r: reverse("run_suggest", args=[r.project.slug, r.pk]),
}


def _state() -> tuple[Any, ...]:
    rows = TrainingRun.objects.values_list("pk", "state", "promoted_at")
    return (sorted(rows, key=str), Job.objects.count())


def test_every_url_of_the_app_is_covered() -> None:
    from modeling import urls

    assert {p.name for p in urls.urlpatterns} == set(PAGES) | set(ACTIONS)


@pytest.mark.parametrize("name", list(PAGES))
def test_reviewers_may_look(run: TrainingRun, rey: Any, name: str) -> None:
    assert login(rey).get(PAGES[name](run)).status_code == 200


@pytest.mark.parametrize("name", list(PAGES))
def test_annotators_may_not_look(run: TrainingRun, ann: Any, name: str) -> None:
    assert login(ann).get(PAGES[name](run)).status_code == 403


@pytest.mark.parametrize("name", list(PAGES))
def test_outsiders_get_404(run: TrainingRun, olive: Any, name: str) -> None:
    assert login(olive).get(PAGES[name](run)).status_code == 404


@pytest.mark.parametrize("name", list(PAGES))
def test_anonymous_visitors_are_sent_to_log_in(run: TrainingRun, name: str) -> None:
    response = Client().get(PAGES[name](run))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("who", ["rey", "ann"])
@pytest.mark.parametrize("name", list(ACTIONS))
def test_only_researchers_act(
    run: TrainingRun, who: str, name: str, request: pytest.FixtureRequest
) -> None:
    before = _state()
    response = login(request.getfixturevalue(who)).post(ACTIONS[name](run))
    assert response.status_code == 403
    assert _state() == before


@pytest.mark.parametrize("name", list(ACTIONS))
def test_outsiders_cannot_act(run: TrainingRun, olive: Any, name: str) -> None:
    before = _state()
    assert login(olive).post(ACTIONS[name](run)).status_code == 404
    assert _state() == before


def test_a_run_of_another_project_is_404(run: TrainingRun, alice: Any) -> None:
    other = Project.objects.create(name="Other", slug="other")
    url = reverse("run_detail", args=[other.slug, run.pk])
    assert login(alice).get(url).status_code == 404


@pytest.mark.parametrize("name", list(ACTIONS))
def test_actions_refuse_get(run: TrainingRun, alice: Any, name: str) -> None:
    assert login(alice).get(ACTIONS[name](run)).status_code == 405


def test_the_leaderboard_ranks_by_cider_and_shows_unavailable_as_na(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    weaker = _run(project, snapshot, model_name="lstm", metrics={"test": {"CIDEr-D": 0.05}})
    stronger = _run(project, snapshot, model_name="topdown", metrics={"test": {"CIDEr-D": 0.4}})

    url = reverse("run_list", args=[project.slug])
    html = login(alice).get(f"{url}?split=test").content.decode()

    board = html[html.index('data-testid="leaderboard"') :]
    assert board.index(f"#{stronger.pk} topdown") < board.index(f"#{weaker.pk} lstm")
    assert "n/a" in board


def test_the_leaderboard_ranks_by_val_the_split_the_suggesting_run_is_chosen_on(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    val_best = _run(project, snapshot, model_name="lstm", metrics={"val": {"CIDEr-D": 0.5}})
    _run(project, snapshot, model_name="topdown", metrics={"val": {"CIDEr-D": 0.2}})

    html = login(alice).get(reverse("run_list", args=[project.slug])).content.decode()

    board = html[html.index('data-testid="leaderboard"') :]
    first = board[board.index("<tbody>") :].split("</tr>")[0]
    assert f"#{val_best.pk} lstm" in first
    assert "<th>val CIDEr-D</th>" in board
    assert "<td>beam 3</td>" in first
    assert "chosen by val CIDEr-D (beam search)" in html


def test_a_researcher_queues_a_run_from_the_form(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    response = login(alice).post(
        reverse("run_list", args=[project.slug]),
        {
            "model_name": "lstm",
            "preset": "small",
            "snapshot": snapshot.pk,
            "overrides": "train.epochs=3\n# a comment\nmodel.dropout=0.1",
        },
    )

    run = TrainingRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == run.get_absolute_url()
    assert run.overrides == ["train.epochs=3", "model.dropout=0.1"]
    assert run.config["run"]["train"]["epochs"] == 3
    assert run.job is not None
    assert run.job.kind == "training_run"
    assert run.job.queue == "gpu"


def test_the_form_shows_each_models_recipe(project: Project, alice: Any) -> None:
    html = login(alice).get(reverse("run_list", args=[project.slug])).content.decode()

    table = html[html.index('data-testid="recipes"') :]
    assert "Liu et al., Interspeech 2023 (ACT)" in table
    assert "captions 15 epochs at 1e-4 (5 warm-up)" in table
    assert "Ye et al., DCASE 2021 (MAAC)" in table
    assert 'name="epochs"' in html


def test_a_run_from_the_form_follows_its_recipe_scaled_to_the_epochs_given(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    login(alice).post(
        reverse("run_list", args=[project.slug]),
        {"model_name": "act", "preset": "paper", "snapshot": snapshot.pk, "epochs": "3"},
    )

    run = TrainingRun.objects.get()
    train = run.config["run"]["train"]
    assert (train["epochs"], train["warmup_epochs"], train["lr"]) == (3, 1.0, 1e-4)
    assert run.recipe["paper"] == "Liu et al., Interspeech 2023 (ACT)"
    assert {c["setting"]: c["why"] for c in run.recipe["changes"]} == {
        "train.epochs": "scaled",
        "train.warmup_epochs": "scaled",
    }


def test_the_form_lists_the_recipes_named_by_source(project: Project, alice: Any) -> None:
    html = login(alice).get(reverse("run_list", args=[project.slug])).content.decode()

    assert '<option value="maac-code">' in html
    table = html[html.index('data-testid="recipes"') :]
    assert "maac (maac-code)" in table
    assert "scheduled sampling up to 0.3" in table


def test_a_run_from_the_form_trains_with_the_recipe_chosen(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    login(alice).post(
        reverse("run_list", args=[project.slug]),
        {"model_name": "maac", "preset": "tiny", "snapshot": snapshot.pk, "recipe": "maac-code"},
    )

    run = TrainingRun.objects.get()
    assert run.recipe["name"] == "maac-code"
    assert run.config["run"]["decoding"]["length_penalty"] == 1.15


def test_a_recipe_of_another_model_is_refused_in_the_form(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    response = login(alice).post(
        reverse("run_list", args=[project.slug]),
        {"model_name": "lstm", "preset": "small", "snapshot": snapshot.pk, "recipe": "act-code"},
    )

    assert response.status_code == 400
    assert "act-code does not train lstm" in response.content.decode()
    assert not TrainingRun.objects.exists()


def test_a_bad_setting_in_the_form_is_shown_and_nothing_queued(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    response = login(alice).post(
        reverse("run_list", args=[project.slug]),
        {"model_name": "lstm", "preset": "small", "snapshot": snapshot.pk, "overrides": "lr=1"},
    )

    assert response.status_code == 400
    assert "unknown config key" in response.content.decode()
    assert not TrainingRun.objects.exists()
    assert not Job.objects.exists()


def test_the_detail_page_shows_scores_and_the_curve(run: TrainingRun, alice: Any) -> None:
    html = login(alice).get(PAGES["run_detail"](run)).content.decode()

    assert "0.310" in html  # test CIDEr-D
    assert 'data-testid="curve"' in html
    assert "Use it to suggest captions" in html


def test_the_detail_page_shows_the_recipe_and_how_the_run_differs(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    plan = planning.run_plan(model_name="maac", preset="small", overrides=["train.lr=1e-3"])
    run = _run(project, snapshot, model_name="maac", config=plan.config, recipe=plan.recipe)

    html = login(alice).get(PAGES["run_detail"](run)).content.decode()

    section = html[html.index('data-testid="recipe"') :]
    assert "Ye et al., DCASE 2021 (MAAC)" in section
    changes = section[section.index('data-testid="recipe-changes"') :]
    assert "model size" in changes
    assert "scaled" in changes
    assert "train.lr" in changes
    assert "0.0003" in changes
    assert "0.001" in changes
    assert "train.pretrain_frozen_epochs" in changes
    assert "adapted" in changes
    assert "no pretrained weights" in changes
    assert "BOS2" not in section
    assert "ResNet38" in section
    suggest = html[html.index('data-testid="suggest"') :]
    beam = suggest[suggest.index('name="beam_size"') - 60 : suggest.index('name="beam_size"') + 60]
    assert 'value="4"' in beam  # suggestions default to the recipe's beam


def test_a_run_recorded_before_recipes_shows_no_recipe(run: TrainingRun, alice: Any) -> None:
    html = login(alice).get(PAGES["run_detail"](run)).content.decode()
    assert 'data-testid="recipe"' not in html


def test_the_curve_is_an_svg_of_loss_and_score(run: TrainingRun, alice: Any) -> None:
    run.learning_curve = [
        {"step": 1, "epoch": 0, "loss": 4.0, "lr": 1e-3},
        {"step": 2, "epoch": 0, "loss": 3.0, "lr": 1e-3},
        {"step": 2, "epoch": 0, "val_loss": 3.1, "score": 0.25},
    ]
    run.save(update_fields=["learning_curve"])

    response = login(alice).get(PAGES["run_curve"](run))

    svg = response.content.decode()
    assert response["Content-Type"] == "image/svg+xml"
    assert svg.startswith("<svg")
    assert svg.endswith("</svg>")
    assert "training loss: 4.000 max, 3.000 min" in svg
    assert "validation CIDEr-D (greedy): 0.250 max" in svg
    assert svg.count("<circle") == 1


def test_promoting_marks_the_run(run: TrainingRun, alice: Any) -> None:
    login(alice).post(ACTIONS["run_promote"](run))
    run.refresh_from_db()
    assert run.promoted_at is not None


def test_resume_refuses_a_succeeded_run_and_offers_a_new_run_from_its_checkpoint(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    job = Job.objects.create(
        kind="training_run",
        label="t",
        params={},
        project=project,
        state=Job.State.SUCCEEDED,
        finished_at=timezone.now(),
    )
    succeeded = _run(project, snapshot, job=job, steps=40)

    response = login(alice).post(ACTIONS["run_resume"](succeeded), follow=True)

    page = response.content.decode()
    assert f"Run #{succeeded.pk} succeeded; a finished run does not resume." in page
    assert 'data-testid="start-from"' in page
    succeeded.refresh_from_db()
    assert succeeded.state == TrainingRun.State.SUCCEEDED
    assert succeeded.steps == 40
    assert Job.objects.count() == 1  # nothing queued


def test_a_new_run_starts_from_a_succeeded_runs_checkpoint(run: TrainingRun, alice: Any) -> None:
    response = login(alice).post(ACTIONS["run_start_from"](run), {"epochs": "4"})

    new = TrainingRun.objects.exclude(pk=run.pk).get()
    assert response.status_code == 302
    assert response["Location"] == new.get_absolute_url()
    assert new.started_from == run
    assert new.state == TrainingRun.State.QUEUED
    assert new.snapshot == run.snapshot
    assert new.config["run"]["train"]["epochs"] == 4
    assert new.overrides == [*run.overrides, "train.epochs=4"]
    assert new.job is not None
    assert new.job.kind == "training_run"
    assert new.job.params == {"run_id": new.pk}
    run.refresh_from_db()
    assert run.state == TrainingRun.State.SUCCEEDED  # the source row is left as it was
    assert run.checkpoint.name == "checkpoints/run.pt"


def test_a_new_run_starts_only_from_a_succeeded_run(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    failed = _run(project, snapshot, state=TrainingRun.State.FAILED)

    response = login(alice).post(ACTIONS["run_start_from"](failed), follow=True)

    assert "a new run starts from a succeeded run" in response.content.decode()
    assert TrainingRun.objects.count() == 1
    assert not Job.objects.exists()


def test_a_new_run_from_a_checkpoint_refuses_zero_epochs(run: TrainingRun, alice: Any) -> None:
    response = login(alice).post(ACTIONS["run_start_from"](run), {"epochs": "0"}, follow=True)

    assert "at least 1" in response.content.decode()
    assert TrainingRun.objects.count() == 1


def test_the_detail_page_links_the_run_it_started_from(run: TrainingRun, alice: Any) -> None:
    new = _run(run.project, run.snapshot, started_from=run)

    page = login(alice).get(PAGES["run_detail"](new)).content.decode()

    assert f'{PAGES["run_detail"](run)}">run #{run.pk}</a>' in page


def test_suggesting_queues_a_gpu_job_for_the_subset(
    run: TrainingRun, alice: Any, project: Project
) -> None:
    subset = Subset.objects.create(project=project, name="Birds", slug="birds")

    login(alice).post(ACTIONS["run_suggest"](run), {"subset": subset.pk, "beam_size": 3})

    job = Job.objects.get(kind="clips_caption")
    assert job.params == {"run_id": run.pk, "subset_id": subset.pk, "beam_size": 3}
    assert job.queue == "gpu"


def test_suggesting_cannot_name_another_projects_subset(
    run: TrainingRun, alice: Any, olive: Any
) -> None:
    other = Project.objects.create(name="Other", slug="other")
    subset = Subset.objects.create(project=other, name="Theirs", slug="theirs")

    login(alice).post(ACTIONS["run_suggest"](run), {"subset": subset.pk, "beam_size": 3})

    assert not Job.objects.exists()


def test_cancelling_asks_the_runs_job_to_stop(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    job = Job.objects.create(
        kind="training_run",
        label="t",
        params={},
        project=project,
        state=Job.State.RUNNING,
        execution="elsewhere",  # a runner holds it, as a running job's constraint wants
        lease_expires_at=timezone.now() + timedelta(minutes=1),
    )
    running = _run(project, snapshot, state=TrainingRun.State.RUNNING, checkpoint="", job=job)

    login(alice).post(ACTIONS["run_cancel"](running))

    job.refresh_from_db()
    assert job.cancel_requested
