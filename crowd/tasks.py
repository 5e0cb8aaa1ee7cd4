from __future__ import annotations

from celery import shared_task


@shared_task(name="crowd.tasks.assignments_auto_approve")
def assignments_auto_approve() -> int:
    from crowd.services import assignments_auto_approve as approve

    return approve()
