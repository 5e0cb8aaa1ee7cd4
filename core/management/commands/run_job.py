from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.models import Job
from core.services import job_run, stop_on_sigterm


class Command(BaseCommand):
    help = "Run a queued job in this process (useful without a broker, or to debug)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_id", type=int)

    def handle(self, *args: Any, job_id: int, **options: Any) -> None:
        if not Job.objects.filter(pk=job_id).exists():
            raise CommandError(f"No job #{job_id}.")
        with stop_on_sigterm():
            job = job_run(job_id=job_id, echo=self.stdout.write)
        self.stdout.write(f"job #{job.pk}: {job.state} {job.error}".rstrip())
        if job.state == Job.State.FAILED:
            raise CommandError(job.error)
