"""The account page: the country a user declares (batches limited to some locales read it)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from core.models import Profile
from core.services import profile_country, profile_country_set
from tests.conftest import login


def test_it_shows_the_country_declared(ann: Any) -> None:
    profile_country_set(user=ann, country="CA")
    response = login(ann).get(reverse("account"))
    assert response.status_code == 200
    assert b'<option value="CA" selected>' in response.content


def test_it_saves_a_country(ann: Any) -> None:
    response = login(ann).post(reverse("account"), {"country": "AU"})
    assert response.status_code == 302
    assert profile_country(user=ann) == "AU"


def test_it_withdraws_a_country(ann: Any) -> None:
    profile_country_set(user=ann, country="AU")
    login(ann).post(reverse("account"), {"country": ""})
    profile = Profile.objects.get(user=ann)
    assert (profile.country, profile.country_declared_at) == ("", None)


def test_it_is_for_signed_in_users_only(db: None) -> None:
    response = Client().get(reverse("account"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_service_refuses_a_code_outside_iso_3166(ann: Any) -> None:
    with pytest.raises(ValidationError, match="'ZZ' is not an ISO 3166 country code"):
        profile_country_set(user=ann, country="ZZ")
    assert not Profile.objects.filter(user=ann).exists()


def test_the_service_takes_any_case(ann: Any) -> None:
    assert profile_country_set(user=ann, country=" gb ").country == "GB"
