from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Batch
from annotation.platforms.mturk.reviews import mturk_reviews_send


class Command(BaseCommand):
    help = "Send MTurk the approvals and rejections of its assignments not sent yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=None, help="only this batch")

    def handle(self, *args: Any, **opts: Any) -> None:
        batch = None
        if opts["batch"] is not None:
            batch = Batch.objects.filter(pk=opts["batch"]).first()
            if batch is None:
                raise CommandError(f"No batch #{opts['batch']}.")
        result = mturk_reviews_send(batch=batch)
        self.stdout.write(
            f"sent {result['sent']}, refused by MTurk {result['refused']}, "
            f"held for another worker or HIT there {result['mismatched']}"
        )
        if result["mismatched"]:
            raise CommandError(
                "Some assignments were submitted here under another worker's id or HIT than "
                "MTurk has (see the log); their reviews are not sent."
            )
        if result["refused"]:
            raise CommandError("Some reviews were refused; they are retried on the next run.")
