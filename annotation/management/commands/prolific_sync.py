from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.platforms.prolific.sync import prolific_sync


class Command(BaseCommand):
    help = (
        "Send Prolific the decisions and bonuses not sent yet, free the slots of places "
        "returned or timed out there, and reconcile the money (beat does this every 5 minutes)."
    )

    def handle(self, *args: Any, **opts: Any) -> None:
        result = prolific_sync()
        self.stdout.write(", ".join(f"{k} {v}" for k, v in result.items()) or "nothing on Prolific")
        if any(v for k, v in result.items() if k.endswith(("_refused", "_failed"))):
            raise CommandError("Prolific refused or missed some calls; they are tried again later.")
