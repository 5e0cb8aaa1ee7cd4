"""The management command that publishes a batch on a crowd platform: each platform's
`<platform>_publish` command is this with its job kind, name and help."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from annotation.models import Batch
from core.management.base import JobCommand


class PublishCommand(JobCommand):
    job_kind: str  # the core.jobs kind that publishes (e.g. "mturk_publish")
    platform_name: str  # as the job's label says it ("MTurk")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch_id", type=int)

    def handle(self, *args: Any, **opts: Any) -> None:
        batch = Batch.objects.select_related("project").filter(pk=opts["batch_id"]).first()
        if batch is None:
            raise CommandError(f"No batch #{opts['batch_id']}.")
        self.run_job(
            kind=self.job_kind,
            params={"batch_id": batch.pk},
            project=batch.project,
            label=f"Publish {batch.name} on {self.platform_name}",
        )
