"""core.roles: a user's role groups follow their memberships on every save and delete."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, User

from core.models import Membership, Project, Role
from core.services import membership_add, project_create
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def _fresh(user: User) -> User:
    return User.objects.get(pk=user.pk)  # a new permission cache


def _role_groups(user: User) -> set[str]:
    return set(user.groups.filter(name__in=Role.values).values_list("name", flat=True))


def test_a_researcher_demoted_to_annotator_loses_the_researcher_permissions(
    project: Project, alice: User
) -> None:
    membership_add(project=project, user=alice, role=Role.ANNOTATOR)

    alice = _fresh(alice)
    assert _role_groups(alice) == {"annotator"}
    assert not alice.has_perm("core.add_project")
    assert not alice.has_perm("core.view_job")


def test_a_role_changed_in_the_admin_moves_the_user_between_groups(
    project: Project, rey: User
) -> None:
    membership = Membership.objects.get(project=project, user=rey)
    membership.role = Role.ANNOTATOR
    membership.save()

    assert _role_groups(_fresh(rey)) == {"annotator"}


def test_a_removed_member_leaves_the_roles_group(project: Project, rey: User) -> None:
    Membership.objects.filter(project=project, user=rey).delete()

    rey = _fresh(rey)
    assert _role_groups(rey) == set()
    assert not rey.has_perm("core.review_project")


def test_a_researcher_elsewhere_keeps_the_researcher_group(project: Project, alice: User) -> None:
    project_create(name="Alice's second", slug="second", created_by=alice)

    membership_add(project=project, user=alice, role=Role.REVIEWER)

    assert _role_groups(_fresh(alice)) == {"researcher", "reviewer"}


def test_a_membership_moved_to_another_user_resyncs_both(project: Project, rey: User) -> None:
    newcomer = make_user("newcomer")
    membership = Membership.objects.get(project=project, user=rey)
    membership.user = newcomer
    membership.save()

    assert _role_groups(_fresh(rey)) == set()
    assert _role_groups(_fresh(newcomer)) == {"reviewer"}


def test_a_deleted_project_takes_its_roles_groups_away(project: Project, rey: User) -> None:
    project.delete()

    assert _role_groups(_fresh(rey)) == set()


def test_groups_that_are_not_roles_are_left_alone(project: Project, rey: User) -> None:
    rey.groups.add(Group.objects.create(name="lab admins"))

    Membership.objects.filter(project=project, user=rey).delete()

    assert set(_fresh(rey).groups.values_list("name", flat=True)) == {"lab admins"}


def test_deleting_a_member_deletes_the_user_cleanly(project: Project, rey: User) -> None:
    rey.delete()

    assert not User.objects.filter(username="rey").exists()


def test_the_migration_resyncs_users_whose_groups_grew_stale(project: Project, ann: User) -> None:
    migration = import_module("core.migrations.0003_role_groups_follow_memberships")
    researcher = Group.objects.get(name="researcher")
    # as membership_add left a demoted researcher before groups followed memberships
    ann.groups.through.objects.create(user_id=ann.pk, group_id=researcher.pk)
    ann.groups.through.objects.filter(user_id=ann.pk, group__name="annotator").delete()

    migration.resync_role_groups(apps, None)

    assert _role_groups(_fresh(ann)) == {"annotator"}
