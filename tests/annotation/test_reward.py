"""A batch's reward: a preset's rate is per clip (AudioCaps paid 10 cents a clip), a worker
is paid per HIT, so the reward per HIT follows the clips per HIT the researcher publishes
with until they set a reward per HIT by hand; the batch page shows both figures; a
published batch's pay never changes (its workers were promised it)."""

from __future__ import annotations

from typing import Any

import pytest
from django import forms
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from annotation.models import Batch
from annotation.services import MAX_REWARD_CENTS
from core.models import Project
from curation.models import Split, Subset
from tests.annotation.factories import make_clips, make_subset, publish
from tests.conftest import login


@pytest.fixture
def subset(project: Project) -> Subset:
    return make_subset(project, make_clips(4), Split.VAL)


def _as_the_browser_sends(form: forms.Form, **typed: str) -> dict[str, str]:
    """The batch form as rendered (every field's shown value; a ticked box as "on"), with
    what the researcher typed over it."""
    shown: dict[str, str] = {}
    for name in form.fields:
        value = form[name].value()
        if value is not None and value is not False:
            shown[name] = "on" if value is True else str(value)
    return {**shown, **typed}


def _publish_from_the_preset(alice: Any, subset: Subset, **typed: str) -> Batch:
    """Fills the batch form from the AudioCaps crowd preset, types `typed` over it (the
    approval figures lowered, as on a new local crowd) and publishes."""
    client = login(alice)
    url = reverse("batch_list", args=["sounds"])
    form = client.get(url, {"preset": "audiocaps-crowd"}).context["form"]
    data = _as_the_browser_sends(
        form, name="AC val", subset=subset.slug, min_approval_percent="", min_approved="", **typed
    )
    response = client.post(url, data)
    assert response.status_code == 302, response.context["form"].errors
    return Batch.objects.get(name="AC val")


# Following the clips per HIT ----------------------------------------------------------------


@pytest.mark.parametrize(("clips_per_hit", "reward"), [(1, 10), (2, 20), (4, 40)])
def test_editing_the_clips_per_hit_after_the_preset_sets_the_reward_per_hit(
    subset: Subset, alice: Any, clips_per_hit: int, reward: int
) -> None:
    batch = _publish_from_the_preset(alice, subset, clips_per_hit=str(clips_per_hit))
    assert (batch.clips_per_hit, batch.reward_cents) == (clips_per_hit, reward)
    assert batch.hits.count() == 4 // clips_per_hit


def test_a_reward_per_hit_set_by_hand_is_kept(subset: Subset, alice: Any) -> None:
    batch = _publish_from_the_preset(alice, subset, clips_per_hit="2", reward_cents="35")
    assert (batch.reward_cents, batch.reward_follows_clips) == (35, False)
    assert batch.reward_cents_per_clip == 10  # kept, to show beside it


def test_the_form_asks_for_some_reward(subset: Subset, alice: Any) -> None:
    url = reverse("batch_list", args=["sounds"])
    form = login(alice).get(url, {"preset": "audiocaps-crowd"}).context["form"]
    data = _as_the_browser_sends(form, name="AC val", subset=subset.slug)
    del data["reward_cents_per_clip"]
    response = login(alice).post(url, data)
    assert response.status_code == 200
    assert response.context["form"].errors["reward_cents"] == [
        "Give a reward per HIT, or a reward per clip to multiply by the clips per HIT."
    ]
    assert not Batch.objects.exists()


def test_a_rate_that_makes_a_hit_pay_too_much_is_refused(subset: Subset) -> None:
    with pytest.raises(ValidationError) as refused:
        publish(subset, clips_per_hit=2, reward_cents=None, reward_cents_per_clip=MAX_REWARD_CENTS)
    assert refused.value.message_dict["reward_cents_per_clip"] == [
        "100,000¢ per clip times 2 clips is 200,000¢ per HIT; pay 0 to 100,000 cents per HIT."
    ]
    assert not Batch.objects.exists()


def test_the_database_refuses_a_reward_that_no_longer_follows_its_rate(subset: Subset) -> None:
    batch = publish(subset, clips_per_hit=2, reward_cents=None, reward_cents_per_clip=10)
    with pytest.raises(IntegrityError), transaction.atomic():
        Batch.objects.filter(pk=batch.pk).update(clips_per_hit=4)


def test_the_api_reports_the_rate_and_whether_the_reward_follows_it(
    subset: Subset, alice: Any
) -> None:
    body = {"name": "AC", "subset": subset.slug, "clips_per_hit": 4, "preset": "audiocaps-crowd"}
    response = login(alice).post(
        "/api/projects/sounds/batches", body, content_type="application/json"
    )
    out = response.json()
    assert (out["reward_cents"], out["reward_cents_per_clip"], out["reward_follows_clips"]) == (
        40,
        10,
        True,
    )


# What the batch page shows ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reward_cents", "shown"),
    [
        (None, "10¢ per clip &times; 2 clips = 20¢ per HIT"),
        (
            35,
            '35¢ per HIT, set by hand <span class="muted">(10¢ per clip &times; 2 clips would '
            "be 20¢)</span>",
        ),
    ],
)
def test_the_batch_page_shows_the_reward_per_clip_and_per_hit(
    subset: Subset, alice: Any, reward_cents: int | None, shown: str
) -> None:
    batch = publish(subset, clips_per_hit=2, reward_cents=reward_cents, reward_cents_per_clip=10)
    html = login(alice).get(batch.get_absolute_url()).content.decode()
    assert f'<td data-testid="reward">{shown}' in html


# A published batch's pay ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [{"reward_cents": 99}, {"clips_per_hit": 4, "reward_cents": 40}, {"reward_cents_per_clip": 1}],
)
def test_a_published_batch_keeps_the_pay_its_workers_were_promised(
    subset: Subset, change: dict[str, int]
) -> None:
    batch = publish(subset, clips_per_hit=2, reward_cents=20)
    for name, value in change.items():
        setattr(batch, name, value)
    with pytest.raises(ValidationError) as refused:
        batch.full_clean()
    message = (
        "Batch 'Validation captions' is published: its workers were promised 20¢ per HIT of "
        "2 clips, which cannot change; publish a new batch to pay differently."
    )
    assert refused.value.message_dict == {name: [message] for name in change}


def test_a_draft_batch_may_still_change_its_pay(subset: Subset) -> None:
    batch = publish(subset, clips_per_hit=2, reward_cents=20, publish=False)
    batch.reward_cents = 25
    batch.full_clean()


def test_the_admin_shows_a_published_batchs_pay_read_only(subset: Subset, staff: Any) -> None:
    batch = publish(subset, clips_per_hit=2, reward_cents=20)
    page = login(staff).get(reverse("admin:annotation_batch_change", args=[batch.pk]))
    fields = page.context["adminform"].form.fields
    pay = {"clips_per_hit", "reward_cents", "reward_cents_per_clip", "reward_follows_clips"}
    assert not pay & set(fields)
    assert "time_allotted" in fields  # the rest stays editable
