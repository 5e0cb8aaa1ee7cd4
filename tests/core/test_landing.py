"""Where a login lands and which links the top bar offers: annotators-only land on Work
and are offered no API links; anyone with a researcher or reviewer role lands on the
project list with them."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from core.models import Project, Role
from core.services import membership_add
from tests.conftest import PASSWORD, login

pytestmark = pytest.mark.django_db


def _log_in(username: str, **extra: str) -> Any:
    return Client().post(reverse("login"), {"username": username, "password": PASSWORD, **extra})


def test_an_annotator_lands_on_work(project: Project, ann: Any) -> None:
    response = _log_in("ann")

    assert response.status_code == 302
    assert response["Location"] == reverse("work")


def test_a_reviewer_lands_on_the_project_list(project: Project, rey: Any) -> None:
    assert _log_in("rey")["Location"] == reverse("home")


def test_an_annotator_who_also_reviews_lands_on_the_project_list(
    project: Project, olive: Any, ann: Any
) -> None:
    other = Project.objects.get(slug="birds")
    membership_add(project=other, user=ann, role=Role.REVIEWER)

    assert _log_in("ann")["Location"] == reverse("home")


def test_an_annotator_asking_for_a_page_lands_on_it(project: Project, ann: Any) -> None:
    assert _log_in("ann", next="/account/")["Location"] == "/account/"


def test_an_annotator_is_offered_no_api_links(project: Project, ann: Any) -> None:
    html = login(ann).get(reverse("work")).content.decode()

    assert reverse("token_list") not in html
    assert "/api/docs" not in html


def test_a_reviewer_is_offered_the_api_links(project: Project, rey: Any) -> None:
    html = login(rey).get(reverse("home")).content.decode()

    assert reverse("token_list") in html
    assert "/api/docs" in html


def test_every_page_starts_with_a_skip_link_to_main(project: Project, rey: Any) -> None:
    html = login(rey).get(reverse("home")).content.decode()

    body = html.split("<body>", 1)[1].lstrip()
    assert body.startswith('<a class="skip-link" href="#main">Skip to content</a>')
    assert '<main id="main" tabindex="-1">' in html
