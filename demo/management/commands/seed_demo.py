from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from demo.services import DEMO_PASSWORD, DEMO_USERS, demo_seed


class Command(BaseCommand):
    help = (
        "Create the offline demo project, lived in: users, clips, work to review, snapshots, "
        "a qualification attempt, and its first training run queued for the gpu worker. "
        "Running it again changes nothing."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        project = demo_seed(echo=self.stdout.write)
        self.stdout.write(self.style.SUCCESS(f"Demo project ready: /projects/{project.slug}/"))
        logins = ", ".join(["admin (staff)", *DEMO_USERS])
        self.stdout.write(f"Demo logins: {logins}; password for all: {DEMO_PASSWORD}")
