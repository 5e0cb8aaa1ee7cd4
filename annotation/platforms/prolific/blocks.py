"""Local blocks mirrored on Prolific through a participant group per project.

Prolific has no per-researcher block call, but its studies take a
`participant_group_blocklist` filter naming participant groups, and a group's members
can be added and removed at any time: "any studies published with a participant group
allowlist or participant group blocklist filter will be updated automatically"
(https://docs.prolific.com/api-reference/participant-groups; the endpoints are
POST /participant-groups/, POST and DELETE /participant-groups/{id}/participants/).

So each project that publishes on Prolific gets one group, "Earmark blocklist: <project>",
in the workspace (PlatformRef kind blocklist: the project's pk, the group's id), created
at its first publication; each of its studies is created with that group as a blocklist
filter (publish.py). A local block of a Prolific participant adds them to the group, and
lifting it removes them, so the project's running studies stop (or start again) showing
to them without touching the studies. A block that reached Prolific has a PlatformRef
(kind block: the group, the participant id and the block); it goes once the lifting
reached Prolific. A call
Prolific refuses is tried again by the next run of the periodic job, and arrival still
refuses a blocked participant here meanwhile (page.py).
"""

from __future__ import annotations

import logging
from collections import defaultdict

from django.conf import settings
from django.core.exceptions import ValidationError

from annotation.models import PlatformRef
from annotation.platforms import refs
from annotation.platforms.prolific.client import PROLIFIC, Kind, ProlificClient, ProlificError
from core.models import Project
from crowd.models import Block

BLOCKLIST_FILTER = "participant_group_blocklist"

logger = logging.getLogger(__name__)


def blocklist_group(*, project: Project, client: ProlificClient) -> str:
    """The id of the project's blocklist group on Prolific, made on first use (with the
    project's blocked participants in it); ValidationError when Prolific refuses."""
    group = refs.external_id(platform=PROLIFIC, kind=Kind.BLOCKLIST, row=project)
    if group:
        return group
    if not settings.PROLIFIC_WORKSPACE_ID:
        raise ValidationError(
            "Set PROLIFIC_WORKSPACE_ID: the project's blocklist (a participant group) is "
            "made in that workspace."
        )
    try:
        made = client.post(
            "participant-groups/",
            {
                "name": f"Earmark blocklist: {project.name}"[:255],
                "workspace_id": settings.PROLIFIC_WORKSPACE_ID,
                "description": "Participants blocked from this Earmark project's work; kept "
                "by Earmark, which adds and removes them as blocks are set and lifted.",
            },
        )
    except ProlificError as exc:
        raise ValidationError(f"Prolific refused the project's blocklist group: {exc}") from None
    refs.ref_create(platform=PROLIFIC, kind=Kind.BLOCKLIST, row=project, external=made["id"])
    return str(made["id"])


def blocklist_filter(*, project: Project, client: ProlificClient) -> dict[str, object]:
    """The study filter that keeps the project's blocked participants out."""
    group = blocklist_group(project=project, client=client)
    prolific_blocks_sync(client=client, projects=[project.pk])
    return {"filter_id": BLOCKLIST_FILTER, "selected_values": [group]}


def prolific_blocks_sync(
    *, client: ProlificClient, projects: list[int] | None = None
) -> dict[str, int]:
    """Adds to each project's blocklist group its blocked Prolific participants not there
    yet, and removes those whose block was lifted here (lifting first, so a participant
    blocked again ends in the group). Projects without a group (nothing published on
    Prolific) are left alone. Returns how many were blocked, lifted and refused."""
    counts = {"blocked": 0, "lifted": 0, "refused": 0}
    groups = dict(
        refs.refs(platform=PROLIFIC, kind=Kind.BLOCKLIST).values_list("local_id", "external_id")
    )
    if projects is not None:
        groups = {pk: group for pk, group in groups.items() if pk in projects}
    if not groups:
        return counts
    pids = dict(
        refs.refs(platform=PROLIFIC, kind=Kind.WORKER).values_list("local_id", "external_id")
    )
    mirrored = refs.refs(platform=PROLIFIC, kind=Kind.BLOCK)
    lifted = Block.objects.filter(
        lifted_at__isnull=False, project_id__in=list(groups), pk__in=mirrored.values("local_id")
    )
    to_block = (
        Block.objects.active()
        .filter(project_id__in=list(groups), worker_id__in=list(pids))
        .exclude(pk__in=mirrored.values("local_id"))
    )
    for change, blocks in (("lifted", lifted), ("blocked", to_block)):
        by_project: dict[int, list[Block]] = defaultdict(list)
        for block in blocks.order_by("pk"):
            by_project[block.project_id].append(block)
        for project_id, found in sorted(by_project.items()):
            ids = sorted({pids[b.worker_id] for b in found})
            path = f"participant-groups/{groups[project_id]}/participants/"
            try:
                if change == "lifted":
                    client.call("DELETE", path, {"participant_ids": ids})
                else:
                    client.post(path, {"participant_ids": ids})
            except ProlificError as exc:
                logger.warning("Prolific refused to update blocklist %s: %s", path, exc)
                counts["refused"] += len(found)
                continue
            if change == "lifted":
                mirrored.filter(local_id__in=[b.pk for b in found]).delete()
            else:
                PlatformRef.objects.bulk_create(
                    PlatformRef(
                        platform=PROLIFIC,
                        kind=Kind.BLOCK,
                        local_id=b.pk,
                        external_id=f"{groups[project_id]}:{pids[b.worker_id]}:{b.pk}",
                    )
                    for b in found
                )
            counts[change] += len(found)
    return counts
