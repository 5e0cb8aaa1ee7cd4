"""Invite links: researchers create and revoke them; visitors sign up and join through them."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.models import Invite, Membership, Project, Role
from core.services import invite_accept, invite_create, invite_revoke
from tests.conftest import PASSWORD, login

SIGNUP = {"username": "newt", "password1": PASSWORD, "password2": PASSWORD, "country": "NZ"}


@pytest.fixture
def invite(project: Project, alice: Any) -> Invite:
    return invite_create(project=project, created_by=alice, max_uses=5)


def _signup(invite: Invite, data: dict[str, str] | None = None) -> tuple[Client, Any]:
    client = Client()
    response = client.post(invite.get_absolute_url(), data or SIGNUP)
    return client, response


def _newt() -> Any:
    return get_user_model().objects.filter(username="newt").first()


# Creating and revoking -----------------------------------------------------------------


def test_it_lets_a_researcher_create_an_invite(project: Project, alice: Any) -> None:
    response = login(alice).post(
        reverse("invite_new", args=[project.slug]),
        {"role": "reviewer", "expires_in_days": "7", "max_uses": "3"},
    )
    assert response.status_code == 302
    assert response["Location"] == project.get_absolute_url()
    invite = Invite.objects.get(project=project)
    assert (invite.role, invite.max_uses, invite.uses, invite.created_by) == (
        Role.REVIEWER,
        3,
        0,
        alice,
    )
    assert invite.expires_at is not None
    expected_expiry = timezone.now() + timedelta(days=7)
    assert abs(invite.expires_at - expected_expiry) < timedelta(minutes=1)


def test_it_shows_the_new_invite_link_to_the_researcher(project: Project, alice: Any) -> None:
    client = login(alice)
    client.post(reverse("invite_new", args=[project.slug]), {"role": "annotator"})
    response = client.get(project.get_absolute_url())
    assert response.status_code == 200
    invite = Invite.objects.get(project=project)
    assert f"http://testserver/invite/{invite.token}/".encode() in response.content


def test_it_refuses_an_invite_with_a_made_up_role(project: Project, alice: Any) -> None:
    response = login(alice).post(
        reverse("invite_new", args=[project.slug]), {"role": "owner"}, follow=True
    )
    assert response.status_code == 200
    assert b"Invite not created" in response.content
    assert not Invite.objects.exists()


def test_it_lets_a_researcher_revoke_an_invite(invite: Invite, alice: Any) -> None:
    url = reverse("invite_revoke", args=[invite.project.slug, invite.pk])
    response = login(alice).post(url)
    assert response.status_code == 302
    invite.refresh_from_db()
    assert invite.revoked_at is not None


@pytest.mark.parametrize(("persona", "status"), [("ann", 403), ("rey", 403), ("olive", 404)])
def test_it_refuses_invite_creation_to_non_researchers(
    project: Project, persona: str, status: int, request: pytest.FixtureRequest
) -> None:
    user = request.getfixturevalue(persona)
    response = login(user).post(reverse("invite_new", args=[project.slug]), {"role": "researcher"})
    assert response.status_code == status
    assert not Invite.objects.exists()


@pytest.mark.parametrize(("persona", "status"), [("ann", 403), ("rey", 403), ("olive", 404)])
def test_it_refuses_invite_revocation_to_non_researchers(
    invite: Invite, persona: str, status: int, request: pytest.FixtureRequest
) -> None:
    user = request.getfixturevalue(persona)
    url = reverse("invite_revoke", args=[invite.project.slug, invite.pk])
    response = login(user).post(url)
    assert response.status_code == status
    invite.refresh_from_db()
    assert invite.revoked_at is None


def test_it_does_not_revoke_another_projects_invite(invite: Invite, olive: Any) -> None:
    # Olive researches "birds"; the sounds invite is not found under her project.
    response = login(olive).post(reverse("invite_revoke", args=["birds", invite.pk]))
    assert response.status_code == 404
    invite.refresh_from_db()
    assert invite.revoked_at is None


# Signing up through an invite ----------------------------------------------------------


def test_it_offers_a_signup_form_to_anonymous_visitors(invite: Invite) -> None:
    response = Client().get(invite.get_absolute_url())
    assert response.status_code == 200
    assert b"You are invited as <strong>annotator</strong>" in response.content
    assert b'name="password2"' in response.content


def test_it_signs_a_visitor_up_and_sends_them_to_the_project(invite: Invite) -> None:
    _, response = _signup(invite)
    assert response.status_code == 302
    assert response["Location"] == invite.project.get_absolute_url()
    assert _newt() is not None


def test_it_makes_the_new_user_an_annotator_member(invite: Invite) -> None:
    _signup(invite)
    membership = Membership.objects.get(project=invite.project, user=_newt())
    assert membership.role == Role.ANNOTATOR
    assert membership.invite == invite


def test_it_puts_the_new_user_in_the_annotator_group(invite: Invite) -> None:
    _signup(invite)
    assert list(_newt().groups.values_list("name", flat=True)) == ["annotator"]


def test_it_counts_a_use_of_the_invite(invite: Invite) -> None:
    _signup(invite)
    invite.refresh_from_db()
    assert invite.uses == 1


def test_it_logs_the_new_user_in(invite: Invite) -> None:
    client, _ = _signup(invite)
    response = client.get(invite.project.get_absolute_url())
    assert response.status_code == 200
    assert b'<span data-testid="username">newt</span>' in response.content


def test_it_keeps_the_country_the_new_user_declares(invite: Invite) -> None:
    _signup(invite)
    profile = _newt().profile
    assert profile.country == "NZ"
    assert profile.country_declared_at is not None


def test_it_asks_for_a_country_at_sign_up(invite: Invite) -> None:
    _, response = _signup(invite, {**SIGNUP, "country": ""})
    assert response.status_code == 200
    assert b"This field is required" in response.content
    assert _newt() is None


def test_it_refuses_a_country_that_is_not_iso_3166(invite: Invite) -> None:
    _, response = _signup(invite, {**SIGNUP, "country": "XX"})
    assert response.status_code == 200
    assert b"Select a valid choice" in response.content
    assert _newt() is None


@pytest.mark.parametrize("username", ["mturk-A1B2C3D4E5F6G7", "MTurk-A1B2C3D4E5F6G7"])
def test_it_refuses_a_username_reserved_for_mturk_workers(invite: Invite, username: str) -> None:
    _, response = _signup(invite, {**SIGNUP, "username": username})
    assert response.status_code == 200
    assert "are reserved for Amazon Mechanical Turk workers" in response.content.decode()
    assert not get_user_model().objects.filter(username__iexact=username).exists()
    invite.refresh_from_db()
    assert invite.uses == 0


def test_it_keeps_the_form_on_a_bad_signup(invite: Invite) -> None:
    _, response = _signup(invite, {**SIGNUP, "password2": "something-else-entirely"})
    assert response.status_code == 200
    assert b"didn" in response.content  # "The two password fields didn't match."
    assert _newt() is None
    invite.refresh_from_db()
    assert invite.uses == 0


def test_it_answers_404_for_an_unknown_invite(db: None) -> None:
    response = Client().get(reverse("invite_accept", args=["no-such-token"]))
    assert response.status_code == 404


# Unusable invites ----------------------------------------------------------------------


def _revoke(invite: Invite) -> None:
    invite_revoke(invite=invite)


def _expire(invite: Invite) -> None:
    Invite.objects.filter(pk=invite.pk).update(expires_at=timezone.now() - timedelta(minutes=1))


def _use_up(invite: Invite) -> None:
    Invite.objects.filter(pk=invite.pk).update(max_uses=2, uses=2)


UNUSABLE: list[tuple[Callable[[Invite], None], bytes]] = [
    (_revoke, b"This invite link was revoked."),
    (_expire, b"This invite link has expired."),
    (_use_up, b"This invite link has been used as many times as allowed."),
]
UNUSABLE_IDS = ["revoked", "expired", "used up"]


@pytest.mark.parametrize(("spoil", "reason"), UNUSABLE, ids=UNUSABLE_IDS)
def test_it_shows_why_an_invite_cannot_be_used(
    invite: Invite, spoil: Callable[[Invite], None], reason: bytes
) -> None:
    spoil(invite)
    response = Client().get(invite.get_absolute_url())
    assert response.status_code == 200
    assert reason in response.content
    assert b"Create account and join" not in response.content


@pytest.mark.parametrize(("spoil", "reason"), UNUSABLE, ids=UNUSABLE_IDS)
def test_it_signs_nobody_up_through_an_unusable_invite(
    invite: Invite, spoil: Callable[[Invite], None], reason: bytes
) -> None:
    spoil(invite)
    members_before = Membership.objects.count()
    _, response = _signup(invite)
    assert response.status_code == 200
    assert reason in response.content
    assert _newt() is None
    assert Membership.objects.count() == members_before


@pytest.mark.parametrize(("spoil", "reason"), UNUSABLE, ids=UNUSABLE_IDS)
def test_it_adds_no_logged_in_user_through_an_unusable_invite(
    invite: Invite, olive: Any, spoil: Callable[[Invite], None], reason: bytes
) -> None:
    spoil(invite)
    response = login(olive).post(invite.get_absolute_url())
    assert response.status_code == 200
    assert reason in response.content
    assert invite.project.role_of(olive) is None


@pytest.mark.parametrize(("spoil", "reason"), UNUSABLE, ids=UNUSABLE_IDS)
def test_it_refuses_an_unusable_invite_in_the_service_too(
    invite: Invite, olive: Any, spoil: Callable[[Invite], None], reason: bytes
) -> None:
    spoil(invite)
    with pytest.raises(ValidationError, match=re.escape(reason.decode())):
        invite_accept(token=invite.token, user=olive)
    assert invite.project.role_of(olive) is None


def test_it_stops_accepting_once_used_up(project: Project, alice: Any) -> None:
    invite = invite_create(project=project, created_by=alice, max_uses=1)
    _signup(invite)
    _, response = _signup(invite, {**SIGNUP, "username": "second"})
    assert response.status_code == 200
    assert b"used as many times as allowed" in response.content
    assert not get_user_model().objects.filter(username="second").exists()
    invite.refresh_from_db()
    assert invite.uses == 1


# Logged-in users -----------------------------------------------------------------------


def test_it_offers_a_logged_in_user_to_join_as_themselves(invite: Invite, olive: Any) -> None:
    response = login(olive).get(invite.get_absolute_url())
    assert response.status_code == 200
    assert b"Join as olive" in response.content
    assert b'name="password1"' not in response.content


def test_it_adds_a_logged_in_outsider_with_the_invites_role(invite: Invite, olive: Any) -> None:
    response = login(olive).post(invite.get_absolute_url())
    assert response.status_code == 302
    assert invite.project.role_of(olive) == Role.ANNOTATOR
    invite.refresh_from_db()
    assert invite.uses == 1


def test_it_keeps_the_role_of_a_member_following_an_invite(invite: Invite, rey: Any) -> None:
    response = login(rey).post(invite.get_absolute_url())
    assert response.status_code == 302
    assert response["Location"] == invite.project.get_absolute_url()
    assert invite.project.role_of(rey) == Role.REVIEWER


def test_it_counts_no_use_when_a_member_follows_an_invite(invite: Invite, alice: Any) -> None:
    login(alice).post(invite.get_absolute_url())
    invite.refresh_from_db()
    assert invite.uses == 0
    assert invite.project.role_of(alice) == Role.RESEARCHER
