"""MTurk as an annotation.platforms.base.CrowdPlatform."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from annotation.models import Batch, Platform
from annotation.platforms.mturk.blocks import mturk_blocks_sync
from annotation.platforms.mturk.client import mturk_client
from annotation.platforms.mturk.confirm import mturk_submissions_confirm
from annotation.platforms.mturk.publish import batch_mturk_publish, qualification_requirements
from annotation.platforms.mturk.qualifications import mturk_qualifications_sync
from annotation.platforms.mturk.reviews import mturk_returns_sync, mturk_reviews_send
from core.progress import ProgressFn


class MTurkPlatform:
    name = Platform.MTURK
    label = "Amazon Mechanical Turk"

    def publish(self, *, batch: Batch, by: User | None, progress: ProgressFn) -> dict[str, Any]:
        return batch_mturk_publish(batch=batch, by=by, progress=progress)

    def requirements(self, *, batch: Batch) -> list[dict[str, Any]]:
        return qualification_requirements(batch, client=mturk_client())

    def sync(self) -> dict[str, int]:
        # confirmation first: decisions go out only for confirmed submissions, and a
        # mismatch's block is mirrored in the same run
        return {
            **{f"submissions_{k}": v for k, v in mturk_submissions_confirm().items()},
            **{f"blocks_{k}": v for k, v in mturk_blocks_sync().items()},
            **{f"reviews_{k}": v for k, v in mturk_reviews_send().items()},
            **{f"returns_{k}": v for k, v in mturk_returns_sync().items()},
            **{f"qualifications_{k}": v for k, v in mturk_qualifications_sync().items()},
        }
