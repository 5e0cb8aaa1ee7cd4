from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Batch
from annotation.platforms.mturk.reviews import mturk_returns_sync


class Command(BaseCommand):
    help = "Free the local slots of MTurk assignments returned or abandoned on MTurk."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=None, help="only this batch")

    def handle(self, *args: Any, **opts: Any) -> None:
        batch = None
        if opts["batch"] is not None:
            batch = Batch.objects.filter(pk=opts["batch"]).first()
            if batch is None:
                raise CommandError(f"No batch #{opts['batch']}.")
        result = mturk_returns_sync(batch=batch)
        self.stdout.write(
            f"released {result['released']}, unsettled {result['unsettled']}, "
            f"MTurk did not answer for {result['failed']} HITs"
        )
        if result["failed"]:
            raise CommandError("MTurk did not answer for some HITs; they are tried again later.")
