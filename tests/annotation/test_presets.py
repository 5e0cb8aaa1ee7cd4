"""The "AudioCaps crowd" batch preset: it fills the batch form and the API's fields (each
stays editable), and a batch published with it refuses workers outside its locales or
under its approval figures (its MTurk side: tests/annotation/test_mturk.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Batch
from annotation.presets import BATCH_PRESETS
from annotation.services import hit_claim
from core.models import Project
from core.services import profile_country_set
from crowd.models import BatchRequirements
from curation.models import Split, Subset
from tests.annotation.factories import make_clips, make_subset
from tests.conftest import login

P = "/api/projects/sounds"
AUDIOCAPS_LOCALES = ["AU", "CA", "GB", "NZ", "US"]


@pytest.fixture
def subset(project: Project) -> Subset:
    return make_subset(project, make_clips(4), Split.VAL)


def _form(subset: Subset, **changes: str) -> dict[str, str]:
    """The batch form as the preset fills it (5 clips a HIT), with `changes` typed over it."""
    return {
        "name": "AudioCaps val",
        "subset": subset.slug,
        "split": "val",
        "clips_per_hit": "2",
        "reward_cents": "20",
        "time_allotted_minutes": "30",
        "lifetime_hours": "24",
        "auto_approve_days": "3",
        "min_words": "3",
        "max_words": "40",
        "min_approval_percent": "95",
        "min_approved": "1001",
        "site_wide_record": "on",
        "locales": "AU CA GB NZ US",
        **changes,
    }


def _value(html: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', html) or re.search(
        rf'value="([^"]*)"[^>]*name="{name}"', html
    )
    assert match, f"no {name} in the form"
    return match.group(1)


# The batch form -----------------------------------------------------------------------------


def test_the_form_fills_in_the_preset(subset: Subset, alice: Any) -> None:
    url = reverse("batch_list", args=["sounds"])
    html = login(alice).get(url, {"preset": "audiocaps-crowd"}).content.decode()
    assert _value(html, "reward_cents_per_clip") == "10"
    # empty: the reward per HIT follows the clips per HIT (tests/annotation/test_reward.py)
    assert re.search(r'<input type="number" name="reward_cents" [^>]*id="id_reward_cents">', html)
    assert 'name="reward_cents" value' not in html
    assert _value(html, "min_approval_percent") == "95"
    assert _value(html, "min_approved") == "1001"
    assert _value(html, "locales") == "AU CA GB NZ US"
    assert re.search(r'name="site_wide_record"[^>]*checked', html)
    assert "Filled in from the AudioCaps crowd preset" in html


def test_the_form_without_a_preset_asks_nothing_of_workers(subset: Subset, alice: Any) -> None:
    html = login(alice).get(reverse("batch_list", args=["sounds"])).content.decode()
    assert re.search(
        r'<input type="text" name="locales" maxlength="1000" [^>]*id="id_locales">', html
    )
    assert not re.search(r'name="site_wide_record"[^>]*checked', html)


def test_a_batch_published_from_the_preset_carries_its_requirements(
    subset: Subset, alice: Any
) -> None:
    response = login(alice).post(reverse("batch_list", args=["sounds"]), _form(subset))
    assert response.status_code == 302
    requirements = BatchRequirements.objects.get(batch__name="AudioCaps val")
    assert (requirements.min_approval_percent, requirements.min_approved) == (95, 1001)
    assert requirements.site_wide_record
    assert sorted(requirements.locales.values_list("country", flat=True)) == AUDIOCAPS_LOCALES


def test_the_form_refuses_an_unknown_country_code(subset: Subset, alice: Any) -> None:
    data = _form(subset, locales="GB UK")
    response = login(alice).post(reverse("batch_list", args=["sounds"]), data)
    assert response.status_code == 200
    assert "UK: not ISO 3166 country codes" in response.content.decode()
    assert not Batch.objects.exists()


# The preset's batch refuses workers -----------------------------------------------------------


def _preset_batch(subset: Subset, alice: Any, **changes: str) -> Batch:
    login(alice).post(reverse("batch_list", args=["sounds"]), _form(subset, **changes))
    return Batch.objects.get(name="AudioCaps val")


def test_it_refuses_a_worker_outside_the_locales(subset: Subset, alice: Any, ann: Any) -> None:
    # the approval figures lowered on the form, so only the locale gates
    batch = _preset_batch(subset, alice, min_approval_percent="", min_approved="")
    profile_country_set(user=ann, country="DE")
    assert hit_claim(worker=ann, batch=batch) is None
    profile_country_set(user=ann, country="GB")
    assert hit_claim(worker=ann, batch=batch) is not None


def test_it_refuses_a_worker_under_the_approval_figures(
    subset: Subset, alice: Any, ann: Any
) -> None:
    batch = _preset_batch(subset, alice)
    profile_country_set(user=ann, country="GB")
    assert hit_claim(worker=ann, batch=batch) is None


def test_the_work_page_says_why(subset: Subset, alice: Any, ann: Any) -> None:
    _preset_batch(subset, alice)
    profile_country_set(user=ann, country="DE")
    client = login(ann)
    response = client.post(reverse("work_claim"), follow=True)
    html = response.content.decode()
    assert "No HITs are available for you right now" in html
    assert (
        "AudioCaps val (Everyday sounds): it is open only to workers in Australia, Canada, "
        "United Kingdom, New Zealand or United States of America, and your account says "
        "Germany; it "
        "needs at least 1,001 approved HITs in every project; you have 0."
    ) in html


def test_the_api_claim_of_that_batch_says_why(subset: Subset, alice: Any, ann: Any) -> None:
    batch = _preset_batch(subset, alice)
    response = login(ann).post(f"/api/work/claim?batch={batch.pk}")
    assert response.status_code == 403
    assert response.json()["detail"] == f"Batch #{batch.pk} is not open to you."
    [reason] = response.json()["reasons"]
    assert "your account names no country" in reason


# The API -----------------------------------------------------------------------------------


def _create(client: Client, body: dict[str, Any]) -> Any:
    return client.post(f"{P}/batches", json.dumps(body), content_type="application/json")


def test_the_api_fills_in_the_preset(subset: Subset, alice: Any) -> None:
    body = {"name": "AC", "subset": subset.slug, "clips_per_hit": 2, "preset": "audiocaps-crowd"}
    response = _create(login(alice), body)
    assert response.status_code == 201, response.content
    out = response.json()
    assert out["reward_cents"] == 20
    assert out["requirements"] == {
        "min_approval_percent": 95,
        "min_approved": 1001,
        "site_wide_record": True,
        "locales": AUDIOCAPS_LOCALES,
        "qualifications": [],
    }


def test_the_fields_a_request_gives_win_over_the_preset(subset: Subset, alice: Any) -> None:
    body = {
        "name": "AC",
        "subset": subset.slug,
        "preset": "audiocaps-crowd",
        "reward_cents": 7,
        "min_approved": 0,
        "locales": ["gb"],
    }
    out = _create(login(alice), body).json()
    assert out["reward_cents"] == 7
    assert out["requirements"]["min_approved"] == 0
    assert out["requirements"]["min_approval_percent"] == 95
    assert out["requirements"]["locales"] == ["GB"]


def test_the_api_names_the_presets_when_one_is_unknown(subset: Subset, alice: Any) -> None:
    response = _create(login(alice), {"name": "AC", "subset": subset.slug, "preset": "clotho"})
    assert response.status_code == 400
    assert response.json()["errors"]["preset"] == [
        f"Unknown preset 'clotho'; use one of {', '.join(sorted(BATCH_PRESETS))}."
    ]
    assert not Batch.objects.exists()


def test_the_api_refuses_a_qualification_of_another_project(
    subset: Subset, alice: Any, olive: Any
) -> None:
    body = {"name": "AC", "subset": subset.slug, "qualifications": [999]}
    response = _create(login(alice), body)
    assert response.status_code == 400
    assert "No qualification [999]" in response.json()["errors"]["qualifications"][0]
    assert not Batch.objects.exists()


def test_a_batch_without_requirements_reads_as_asking_nothing(subset: Subset, alice: Any) -> None:
    out = _create(login(alice), {"name": "Plain", "subset": subset.slug}).json()
    assert out["requirements"]["locales"] == []
    assert not BatchRequirements.objects.exists()
