from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.models import Job
from core.services import job_run_inline


class JobCommand(BaseCommand):
    """A management command that runs one job inline through the same service a Celery
    task would call, printing progress, and exits non-zero with the job's error."""

    def run_job(self, *, kind: str, params: dict[str, Any], label: str = "", **kw: Any) -> Job:
        job = job_run_inline(kind=kind, params=params, label=label, echo=self.stdout.write, **kw)
        if job.state != Job.State.SUCCEEDED:
            raise CommandError(f"job #{job.pk} {job.state}: {job.error}")
        summary = ", ".join(f"{k}={v}" for k, v in job.result.items() if not isinstance(v, list))
        self.stdout.write(self.style.SUCCESS(f"job #{job.pk} succeeded: {summary}"))
        return job
