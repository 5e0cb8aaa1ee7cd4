"""Local blocks mirrored on MTurk: a worker blocked from a project's HITs here is blocked
there too (CreateWorkerBlock), so MTurk no longer shows them the requester's HITs and they
cannot come back under their own id; lifting the block lifts it there (DeleteWorkerBlock).

MTurk's blocks are requester-wide, Earmark's per project: a worker blocked on two projects
stays blocked there until the last block here is lifted. A block that reached MTurk has a
PlatformRef (kind block, the WorkerId); the ref goes when MTurk has lifted it, or when
another block of the worker still stands there. Each run is idempotent; a call MTurk
refuses is tried again on the next.
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from annotation.models import MTurkWorker, PlatformRef
from annotation.platforms import refs
from annotation.platforms.mturk.client import MTURK, Kind, mturk_client, mturk_error
from crowd.models import Block

MAX_REASON_CHARS = 1024

logger = logging.getLogger(__name__)


def mturk_blocks_sync(*, client: Any = None) -> dict[str, int]:
    """Sends MTurk the blocks of MTurk workers it does not have yet, and lifts there those
    lifted here. Returns how many were blocked, lifted and refused."""
    counts = {"blocked": 0, "lifted": 0, "refused": 0}
    mirrored = refs.refs(platform=MTURK, kind=Kind.BLOCK)
    workers = MTurkWorker.objects.values("user_id")
    to_block = (
        Block.objects.active()
        .filter(worker__in=workers)
        .exclude(pk__in=mirrored.values("local_id"))
        .select_related("worker__mturk_worker", "project")
        .order_by("pk")
    )
    to_lift = Block.objects.filter(
        lifted_at__isnull=False, pk__in=mirrored.values("local_id")
    ).order_by("pk")
    if not to_block.exists() and not to_lift.exists():
        return counts
    client = client or mturk_client()
    for block in to_block:
        worker_id = block.worker.mturk_worker.worker_id
        reason = f"Blocked from {block.project.name}: {block.reason}"[:MAX_REASON_CHARS]
        try:
            client.create_worker_block(WorkerId=worker_id, Reason=reason)
        except (ClientError, BotoCoreError) as exc:
            logger.warning("MTurk refused to block %s: %s", worker_id, mturk_error(exc))
            counts["refused"] += 1
            continue
        refs.ref_create(platform=MTURK, kind=Kind.BLOCK, row=block, external=worker_id)
        counts["blocked"] += 1
    for block in to_lift:
        ref = mirrored.get(local_id=block.pk)
        still = Block.objects.active().filter(worker_id=block.worker_id).exists()
        if not still:
            try:
                client.delete_worker_block(
                    WorkerId=ref.external_id, Reason="Block lifted by the requester."
                )
            except (ClientError, BotoCoreError) as exc:
                logger.warning("MTurk refused to unblock %s: %s", ref.external_id, mturk_error(exc))
                counts["refused"] += 1
                continue
            counts["lifted"] += 1
        PlatformRef.objects.filter(pk=ref.pk).delete()
    return counts
