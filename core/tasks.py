from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(bind=True, name="core.tasks.run_job")
def run_job(self: Any, job_id: int) -> None:
    from core.services import job_run

    job_run(job_id=job_id, worker=self.request.hostname or "")


@shared_task(name="core.tasks.jobs_fail_lost")
def jobs_fail_lost() -> int:
    from core.services import jobs_fail_lost as fail_lost

    return fail_lost()
