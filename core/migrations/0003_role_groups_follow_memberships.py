"""Resyncs every user's role groups with their memberships.

Before this, joining a project added the role's group and nothing ever took one away, so a
researcher demoted to annotator kept `add_project` and the rest. From now on core.roles
keeps them in step on every membership save and delete; this brings existing users there.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import migrations

ROLES = ("researcher", "reviewer", "annotator")


def resync_role_groups(apps: Any, schema_editor: Any) -> None:
    Membership = apps.get_model("core", "Membership")
    Group = apps.get_model("auth", "Group")
    InGroup = apps.get_model(settings.AUTH_USER_MODEL).groups.through
    held: dict[int, set[str]] = {}
    for user_id, role in Membership.objects.values_list("user_id", "role"):
        held.setdefault(user_id, set()).add(role)
    present: dict[int, set[str]] = {}
    stale: list[int] = []
    for pk, user_id, name in InGroup.objects.filter(group__name__in=ROLES).values_list(
        "pk", "user_id", "group__name"
    ):
        if name in held.get(user_id, set()):
            present.setdefault(user_id, set()).add(name)
        else:
            stale.append(pk)
    for start in range(0, len(stale), 500):
        InGroup.objects.filter(pk__in=stale[start : start + 500]).delete()
    groups = {role: Group.objects.get_or_create(name=role)[0] for role in ROLES} if held else {}
    InGroup.objects.bulk_create(
        [
            InGroup(user_id=user_id, group_id=groups[role].pk)
            for user_id, roles in held.items()
            for role in sorted(roles - present.get(user_id, set()))
        ],
        batch_size=500,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0002_project_audio_sample_rate"),
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(resync_role_groups, migrations.RunPython.noop)]
