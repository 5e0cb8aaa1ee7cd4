from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from crowd.services import assignments_auto_approve


class Command(BaseCommand):
    help = "Approve submitted assignments whose batch's auto-approval delay has passed."

    def handle(self, *args: Any, **options: Any) -> None:
        count = assignments_auto_approve()
        self.stdout.write(f"{count} assignment{'s' if count != 1 else ''} auto-approved.")
