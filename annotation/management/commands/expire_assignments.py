from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from annotation.services import assignments_expire


class Command(BaseCommand):
    help = "Expire accepted assignments past their deadline and give their slots back."

    def handle(self, *args: Any, **options: Any) -> None:
        count = assignments_expire()
        self.stdout.write(f"{count} assignment{'s' if count != 1 else ''} expired.")
