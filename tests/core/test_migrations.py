"""Models and migrations agree, and migrate leaves the three role groups in place."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command

from core.models import Project, Role
from core.roles import GROUP_PERMISSIONS
from core.services import membership_add
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def _dotted(group: Group) -> set[str]:
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in group.permissions.select_related("content_type")
    }


def test_it_has_no_model_changes_without_a_migration() -> None:
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    assert "No changes detected" in out.getvalue()


def test_it_creates_the_three_role_groups() -> None:
    assert set(Group.objects.values_list("name", flat=True)) >= {
        "researcher",
        "reviewer",
        "annotator",
    }


@pytest.mark.parametrize("role", list(Role))
def test_it_grants_each_group_every_listed_permission(role: Role) -> None:
    group = Group.objects.get(name=role)
    # a typo in GROUP_PERMISSIONS would silently drop that permission
    assert _dotted(group) == set(GROUP_PERMISSIONS[role])


def test_it_lets_only_researchers_see_jobs() -> None:
    holders = Group.objects.filter(permissions__codename="view_job")
    assert list(holders.values_list("name", flat=True)) == ["researcher"]


def test_it_lets_researchers_and_reviewers_review() -> None:
    holders = Group.objects.filter(permissions__codename="review_project")
    assert set(holders.values_list("name", flat=True)) == {"researcher", "reviewer"}


def test_it_gives_a_new_annotator_the_annotator_permissions(project: Project) -> None:
    user = make_user("newbie")
    membership_add(project=project, user=user, role=Role.ANNOTATOR)
    user = type(user).objects.get(pk=user.pk)  # fresh permission cache
    assert user.has_perm("core.annotate_project")
    assert not user.has_perm("core.view_job")


def test_it_restores_group_permissions_on_migrate() -> None:
    group = Group.objects.get(name="annotator")
    group.permissions.clear()
    call_command("migrate", verbosity=0)
    assert _dotted(group) == {"core.view_project", "core.annotate_project"}


def test_it_defines_the_custom_project_permissions() -> None:
    codenames = set(
        Permission.objects.filter(content_type__app_label="core").values_list("codename", flat=True)
    )
    assert {"curate_project", "review_project", "annotate_project"} <= codenames
