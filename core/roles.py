"""The three roles as Django groups with permissions.

A user's role is per project (core.Membership.role); joining a project with a role
also puts the user in that role's group, so admin and permission checks agree.
The groups are (re)created after every migrate.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_migrate

from core.models import Role

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


def connect() -> None:
    post_migrate.connect(sync_groups, dispatch_uid="core.roles.sync_groups")
