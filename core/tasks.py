from __future__ import annotations

from typing import Any

from celery import shared_task


# acks_late (the project's default) keeps the message until the job ends; with
# reject_on_worker_lost a pool child killed mid-job (OOM, kill -9) puts it back, and the
# worker that gets it again takes the job over when its kind is safe to run again, or records
# it failed naming the lost process (core.services.job_lifecycle._job_start), at once rather
# than when the job's lease runs out.
@shared_task(bind=True, name="core.tasks.run_job", acks_late=True, reject_on_worker_lost=True)
def run_job(self: Any, job_id: int) -> None:
    from core.services import job_run

    job_run(job_id=job_id, worker=self.request.hostname or "")


@shared_task(name="core.tasks.jobs_fail_lost")
def jobs_fail_lost() -> int:
    from core.services import jobs_fail_lost as fail_lost

    return fail_lost()


@shared_task(name="core.tasks.jobs_redispatch")
def jobs_redispatch() -> int:
    from core.services import jobs_redispatch as redispatch

    return redispatch()
