"""Who may open a project: one membership check for pages, JSON endpoints and bridges.

A project the user is not in reads as missing (404, so a slug leaks nothing); a member whose
role is not among those asked for is refused (403). Staff see every project as researchers.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from ninja.errors import HttpError

from core.models import Membership, Project, Role
from core.services import require_role


def project_membership(
    user: User | AnonymousUser, slug: str, *roles: str, staff_see_all: bool = True
) -> tuple[Project, Role]:
    """The project and the user's role in it. Raises Http404 when there is no such project or
    the user is not in it, PermissionDenied when the role is not one of `roles` (any role
    when none are given)."""
    project = Project.objects.filter(slug=slug).first()
    staff = staff_see_all and bool(getattr(user, "is_staff", False))
    if project is None or (project.role_of(user) is None and not staff):
        raise Http404("No such project.")
    return project, require_role(project, user, *roles)


def annotates_only(user: User | AnonymousUser) -> bool:
    """Whether the user is in projects as an annotator only (not staff, no researcher or
    reviewer role anywhere): the crowd, who land on Work after logging in and are offered
    no API links."""
    if not user.is_authenticated or user.is_staff:
        return False
    user_roles = set(Membership.objects.filter(user=user).values_list("role", flat=True))
    return user_roles == {Role.ANNOTATOR}


def signed_in_user(request: HttpRequest) -> User:
    """The user of a request that login_required (or the API's authentication) let in.
    Those refuse anonymous visitors before the view runs, so the refusal here never fires
    in practice; it is the check that lets the type checker see a User, not an
    AnonymousUser."""
    user = request.user
    if not user.is_authenticated:
        raise PermissionDenied("Sign in first.")
    return user


def project_for_page(request: HttpRequest, slug: str, *roles: str) -> tuple[Project, Role]:
    """For HTML views: Django's 404 and 403 pages answer the refusals."""
    return project_membership(request.user, slug, *roles)


@dataclass(frozen=True)
class Refusals:
    """What a JSON API answers when it refuses a project."""

    not_found: str = "No project {slug!r} (or you are not in it)."  # {slug} is filled in
    # None: the roles that may ("Only the project's researchers may do this.")
    forbidden: str | None = None
    # False only for the modeling API, which has always answered 404 to staff outside a project
    staff_see_all: bool = True

    def forbidden_for(self, roles: tuple[str, ...]) -> str:
        if self.forbidden is not None:
            return self.forbidden
        who = "researchers" if roles == (Role.RESEARCHER,) else "researchers and reviewers"
        return f"Only the project's {who} may do this."


NAMED = Refusals()
TERSE = Refusals(
    not_found="No such project.", forbidden="Your role in this project does not allow that."
)


def project_for_api(
    request: HttpRequest, slug: str, *roles: str, refusals: Refusals = NAMED
) -> Project:
    """For ninja endpoints: the refusals as HttpError(404) and HttpError(403) with a detail."""
    try:
        project, _ = project_membership(
            request.user, slug, *roles, staff_see_all=refusals.staff_see_all
        )
    except Http404:
        raise HttpError(404, refusals.not_found.format(slug=slug)) from None
    except PermissionDenied:
        raise HttpError(403, refusals.forbidden_for(roles)) from None
    return project
