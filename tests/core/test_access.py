"""core.access: one project check for pages and APIs; each API keeps its own refusal texts."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.test import RequestFactory
from ninja.errors import HttpError

from core.access import NAMED, TERSE, Refusals, project_for_api, project_membership
from core.models import Project, Role

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)


def _request(user: Any) -> Any:
    request = RequestFactory().get("/")
    request.user = user
    return request


def _refusal(user: Any, slug: str, *roles: str, refusals: Refusals = NAMED) -> tuple[int, str]:
    with pytest.raises(HttpError) as caught:
        project_for_api(_request(user), slug, *roles, refusals=refusals)
    return caught.value.status_code, str(caught.value)


def test_it_gives_a_member_the_project_and_role(project: Project, rey: Any) -> None:
    assert project_membership(rey, "sounds", *READ) == (project, Role.REVIEWER)


def test_it_hides_the_project_from_outsiders_as_missing(project: Project, olive: Any) -> None:
    with pytest.raises(Http404):
        project_membership(olive, "sounds")
    with pytest.raises(Http404):
        project_membership(olive, "nope")


def test_it_refuses_a_member_without_the_role(project: Project, ann: Any) -> None:
    with pytest.raises(PermissionDenied):
        project_membership(ann, "sounds", *READ)


def test_it_lets_staff_in_as_researchers(project: Project, staff: Any) -> None:
    assert project_membership(staff, "sounds", *WRITE) == (project, Role.RESEARCHER)


def test_it_keeps_the_project_from_staff_when_asked(project: Project, staff: Any) -> None:
    with pytest.raises(Http404):
        project_membership(staff, "sounds", staff_see_all=False)


def test_the_named_refusals_say_who_may(project: Project, olive: Any, ann: Any) -> None:
    assert _refusal(olive, "sounds") == (404, "No project 'sounds' (or you are not in it).")
    assert _refusal(ann, "sounds", *WRITE) == (403, "Only the project's researchers may do this.")
    assert _refusal(ann, "sounds", *READ) == (
        403,
        "Only the project's researchers and reviewers may do this.",
    )


def test_the_terse_refusals_name_nothing(project: Project, olive: Any, ann: Any) -> None:
    assert _refusal(olive, "sounds", refusals=TERSE) == (404, "No such project.")
    assert _refusal(ann, "sounds", *READ, refusals=TERSE) == (
        403,
        "Your role in this project does not allow that.",
    )
