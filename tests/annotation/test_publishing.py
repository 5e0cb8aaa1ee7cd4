"""Publishing a batch on a crowd platform from its page (annotation.platforms.publishing):
the buttons researchers get, the job each queues, and the platform's refusal shown at once."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from annotation.models import Batch
from annotation.platforms.prolific.publish import study_id
from core.models import Job
from core.services import job_run
from tests.annotation.conftest import prolific_ready as _ready
from tests.annotation.factories import MakeBatch
from tests.annotation.mturk_fake import FakeMTurk
from tests.annotation.prolific_fake import FakeProlific
from tests.conftest import login


def _publish_url(batch: Batch, platform: str) -> str:
    return reverse("batch_platform_publish", args=[batch.project.slug, batch.pk, platform])


def _page(batch: Batch, user: Any) -> str:
    response = login(user).get(reverse("batch_detail", args=[batch.project.slug, batch.pk]))
    assert response.status_code == 200
    return str(response.content.decode())


def test_researchers_are_offered_each_platform_on_a_local_batch(
    make_batch: MakeBatch, alice: Any
) -> None:
    html = _page(make_batch(), alice)
    assert 'data-testid="publish-mturk"' in html
    assert 'data-testid="publish-prolific"' in html
    assert "Publish on Prolific" in html


def test_reviewers_get_no_publish_buttons_and_cannot_post(make_batch: MakeBatch, rey: Any) -> None:
    batch = make_batch()
    assert 'data-testid="platform-publish"' not in _page(batch, rey)
    assert login(rey).post(_publish_url(batch, "prolific")).status_code == 403
    assert not Job.objects.exists()


def test_a_researcher_publishes_a_batch_on_prolific_from_its_page(
    make_batch: MakeBatch, prolific: FakeProlific, alice: Any
) -> None:
    batch = _ready(make_batch(clips=2))
    response = login(alice).post(_publish_url(batch, "prolific"))
    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == job.get_absolute_url()
    assert (job.kind, job.params, job.project_id) == (
        "prolific_publish",
        {"batch_id": batch.pk},
        batch.project_id,
    )
    assert job_run(job_id=job.pk).state == Job.State.SUCCEEDED
    batch.refresh_from_db()
    assert batch.platform == "prolific"
    assert prolific.studies[study_id(batch)]["status"] == "ACTIVE"
    html = _page(batch, alice)
    assert "Publish again on Prolific" in html
    assert 'data-testid="publish-mturk"' not in html  # a batch goes to one platform


def test_a_batch_below_prolifics_hourly_minimum_is_refused_on_its_page(
    make_batch: MakeBatch, prolific: FakeProlific, alice: Any
) -> None:
    batch = _ready(make_batch(), reward_cents=10, minutes=5)
    response = login(alice).post(_publish_url(batch, "prolific"), follow=True)
    html = response.content.decode().replace("&#x27;", "'")
    assert "Not published:" in html
    assert "below Prolific's minimum of 6.00 GBP an hour" in html
    assert "Raise the reward to at least 0.50 GBP per HIT" in html
    assert not Job.objects.exists()
    assert not prolific.studies


def test_the_mturk_button_queues_mturks_publish_job(
    make_batch: MakeBatch, mturk: FakeMTurk, alice: Any
) -> None:
    batch = make_batch(clips=2)
    login(alice).post(_publish_url(batch, "mturk"))
    job = Job.objects.get()
    assert job.kind == "mturk_publish"
    assert job_run(job_id=job.pk).state == Job.State.SUCCEEDED
    assert len(mturk.hits) == 2


def test_a_local_batch_is_not_published_anywhere_by_this_url(
    make_batch: MakeBatch, alice: Any
) -> None:
    batch = make_batch()
    response = login(alice).post(_publish_url(batch, "local"), follow=True)
    assert "Not published: Batches are not published on" in response.content.decode()
    assert login(alice).post(_publish_url(batch, "nowhere")).status_code == 404
    assert not Job.objects.exists()


@pytest.mark.parametrize("state", ["paused", "finished"])
def test_a_batch_not_open_gets_no_buttons(make_batch: MakeBatch, alice: Any, state: str) -> None:
    batch = make_batch()
    Batch.objects.filter(pk=batch.pk).update(state=state)
    assert 'data-testid="platform-publish"' not in _page(batch, alice)
