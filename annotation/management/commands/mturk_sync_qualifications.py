from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.platforms.mturk.qualifications import mturk_qualifications_sync


class Command(BaseCommand):
    help = (
        "Send MTurk the grades of qualification tests taken there, and bring new tests "
        "taken there here for reviewers to grade."
    )

    def handle(self, *args: Any, **opts: Any) -> None:
        result = mturk_qualifications_sync()
        self.stdout.write(
            f"grades sent {result['sent']}, refused by MTurk {result['refused']}; "
            f"tests brought here {result['imported']}, skipped {result['skipped']}, "
            f"not listed by MTurk {result['failed']}"
        )
        if result["refused"] or result["failed"]:
            raise CommandError("MTurk refused some calls (see the log); they are retried next run.")
