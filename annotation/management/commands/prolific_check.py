from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.platforms.prolific.check import prolific_check


class Command(BaseCommand):
    help = (
        "Check Prolific mode's settings against the real API: the token (PROLIFIC_TOKEN) "
        "is accepted, the workspace (PROLIFIC_WORKSPACE_ID) is reachable with it, and the "
        "study URL base (PROLIFIC_EXTERNAL_URL) is https."
    )

    def handle(self, *args: Any, **opts: Any) -> None:
        problems = prolific_check(echo=self.stdout.write)
        if problems:
            raise CommandError("; ".join(problems))
        self.stdout.write(self.style.SUCCESS("Prolific is ready."))
