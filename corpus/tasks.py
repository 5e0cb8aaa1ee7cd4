from __future__ import annotations

from celery import shared_task


@shared_task(name="corpus.tasks.snapshots_sweep")
def snapshots_sweep() -> dict[str, int]:
    from corpus.services import snapshots_sweep as sweep

    return sweep()
