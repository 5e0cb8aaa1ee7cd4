from __future__ import annotations

from celery import shared_task


@shared_task(name="annotation.tasks.assignments_expire")
def assignments_expire() -> int:
    from annotation.services import assignments_expire as expire

    return expire()


@shared_task(name="annotation.tasks.mturk_reviews_send")
def mturk_reviews_send() -> dict[str, int]:
    from annotation.platforms.mturk.reviews import mturk_reviews_send as send

    return send()


@shared_task(name="annotation.tasks.mturk_returns_sync")
def mturk_returns_sync() -> dict[str, int]:
    from annotation.platforms.mturk.reviews import mturk_returns_sync as sync

    return sync()


@shared_task(name="annotation.tasks.mturk_qualifications_sync")
def mturk_qualifications_sync() -> dict[str, int]:
    from annotation.platforms.mturk.qualifications import mturk_qualifications_sync as sync

    return sync()


@shared_task(name="annotation.tasks.mturk_identity_sync")
def mturk_identity_sync() -> dict[str, int]:
    from annotation.platforms.mturk.blocks import mturk_blocks_sync
    from annotation.platforms.mturk.confirm import mturk_submissions_confirm

    # confirmation first, so a mismatch's block is mirrored in the same run
    return {**mturk_submissions_confirm(), **mturk_blocks_sync()}


@shared_task(name="annotation.tasks.mturk_bonuses_send")
def mturk_bonuses_send() -> dict[str, int]:
    from annotation.platforms.mturk.bonuses import mturk_bonuses_send as send

    return send()


@shared_task(name="annotation.tasks.mturk_reconcile")
def mturk_reconcile() -> dict[str, int]:
    from annotation.platforms.mturk.reconcile import mturk_reconcile as reconcile

    return reconcile()


@shared_task(name="annotation.tasks.prolific_sync")
def prolific_sync() -> dict[str, int]:
    from annotation.platforms.prolific.sync import prolific_sync as sync

    return sync()
