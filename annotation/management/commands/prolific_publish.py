from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from annotation.models import Batch
from core.management.base import JobCommand


class Command(JobCommand):
    help = (
        "Offer a published batch on Prolific as one study (places: its HITs times "
        "their overlap; the reward checked against Prolific's minimum hourly rate). Run it "
        "again to finish after a failure."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch_id", type=int)

    def handle(self, *args: Any, **opts: Any) -> None:
        batch = Batch.objects.select_related("project").filter(pk=opts["batch_id"]).first()
        if batch is None:
            raise CommandError(f"No batch #{opts['batch_id']}.")
        self.run_job(
            kind="prolific_publish",
            params={"batch_id": batch.pk},
            project=batch.project,
            label=f"Publish {batch.name} on Prolific",
        )
