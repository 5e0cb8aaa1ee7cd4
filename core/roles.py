"""The three roles as Django groups with permissions.

A user's role is per project (core.Membership.role); a user is in exactly the groups of
the roles they hold somewhere, so admin and permission checks agree with memberships.
Every save and delete of a membership (a service, an invite, the admin's inline, a
cascade) resyncs its user's role groups: a researcher demoted to annotator everywhere
loses `add_project` and the rest at once. Groups that are not roles are left alone.
The groups and their permissions are (re)created after every migrate.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_migrate, post_save, pre_save

from core.models import Membership, Role

# group name -> "app_label.codename" permissions
GROUP_PERMISSIONS: dict[str, list[str]] = {
    Role.RESEARCHER: [
        "core.add_project",
        "core.change_project",
        "core.view_project",
        "core.curate_project",
        "core.review_project",
        "core.view_job",
        "core.change_job",
        "core.add_invite",
        "core.view_invite",
        "core.view_membership",
    ],
    Role.REVIEWER: ["core.view_project", "core.review_project", "core.view_membership"],
    Role.ANNOTATOR: ["core.view_project", "core.annotate_project"],
}


def sync_groups(**_: Any) -> None:
    from django.contrib.auth.models import Group, Permission

    for group_name, perms in GROUP_PERMISSIONS.items():
        group, _created = Group.objects.get_or_create(name=group_name)
        wanted: list[Permission] = []
        for dotted in perms:
            app_label, codename = dotted.split(".")
            wanted.extend(
                Permission.objects.filter(content_type__app_label=app_label, codename=codename)
            )
        group.permissions.set(wanted)


def role_groups_sync(*, user_id: int, grant: bool = True) -> None:
    """Puts the user in the groups of the roles their memberships hold and takes them out
    of every other role's group. `grant=False` only takes away: a membership deleted
    along with its user must not add rows for a user being deleted."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    in_group = get_user_model().groups.through
    held = set(Membership.objects.filter(user_id=user_id).values_list("role", flat=True))
    in_group.objects.filter(
        user_id=user_id, group__name__in=[r for r in Role.values if r not in held]
    ).delete()
    if not grant or not held:
        return
    present = set(
        in_group.objects.filter(user_id=user_id, group__name__in=held).values_list(
            "group__name", flat=True
        )
    )
    in_group.objects.bulk_create(
        [
            in_group(user_id=user_id, group_id=Group.objects.get_or_create(name=role)[0].pk)
            for role in sorted(held - present)
        ]
    )


def _remember_previous_user(sender: Any, instance: Membership, **_: Any) -> None:
    # the admin's inline can move a membership to another user: both need a resync
    previous = None
    if instance.pk is not None:
        previous = (
            Membership.objects.filter(pk=instance.pk).values_list("user_id", flat=True).first()
        )
    vars(instance)["_previous_user_id"] = previous


def _membership_saved(sender: Any, instance: Membership, **_: Any) -> None:
    role_groups_sync(user_id=instance.user_id)
    previous = vars(instance).pop("_previous_user_id", None)
    if previous is not None and previous != instance.user_id:
        role_groups_sync(user_id=previous)


def _membership_deleted(sender: Any, instance: Membership, **_: Any) -> None:
    role_groups_sync(user_id=instance.user_id, grant=False)


def connect() -> None:
    post_migrate.connect(sync_groups, dispatch_uid="core.roles.sync_groups")
    pre_save.connect(_remember_previous_user, sender=Membership, dispatch_uid="core.roles.pre")
    post_save.connect(_membership_saved, sender=Membership, dispatch_uid="core.roles.saved")
    post_delete.connect(_membership_deleted, sender=Membership, dispatch_uid="core.roles.deleted")
