"""Reserved usernames: the admin's user forms keep the `mturk-` prefix to the site too."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from core.forms import UserAddForm, UserEditForm
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db


def _edit_data(user: User, **changes: Any) -> dict[str, Any]:
    return {
        "username": user.username,
        "password": user.password,
        "date_joined": user.date_joined,
        "last_login": "",
        "is_active": "on",
        **changes,
    }


def test_staff_cannot_add_an_mturk_named_user() -> None:
    form = UserAddForm(
        {
            "username": "mturk-A1B2C3",
            "password1": PASSWORD,
            "password2": PASSWORD,
            "usable_password": "true",
        }
    )
    assert not form.is_valid()
    assert "reserved for Amazon Mechanical Turk" in form.errors["username"][0]


def test_staff_cannot_rename_someone_to_an_mturk_name() -> None:
    user = make_user("newt")
    form = UserEditForm(_edit_data(user, username="mturk-A1B2C3"), instance=user)
    assert not form.is_valid()
    assert "reserved for Amazon Mechanical Turk" in form.errors["username"][0]


def test_staff_may_edit_an_mturk_account_the_site_made() -> None:
    user = User.objects.create_user(username="mturk-A1B2C3", password=None)
    form = UserEditForm(_edit_data(user, first_name="Worker"), instance=user)
    assert form.is_valid(), form.errors
