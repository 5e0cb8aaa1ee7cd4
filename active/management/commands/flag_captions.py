from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from annotation.models import Batch
from core.management.base import JobCommand


class Command(JobCommand):
    help = (
        "Check a batch's captions for disagreement (model, consensus, word hints) and flag "
        "them for review; captions already checked are skipped."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", required=True, type=int, metavar="ID")

    def handle(self, *args: Any, batch: int, **options: Any) -> None:
        found = Batch.objects.select_related("project").filter(pk=batch).first()
        if found is None:
            raise CommandError(f"No batch with id {batch}.")
        self.run_job(
            kind="batch_flag",
            params={"batch_id": found.pk},
            label=f"Check captions of {found.name}",
            project=found.project,
        )
