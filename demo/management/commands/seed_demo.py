from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from demo.services import DEMO_PASSWORD, DEMO_USERS, demo_seed


class Command(BaseCommand):
    help = "Create the offline demo project, its users, the ontology excerpt and six clips."

    def handle(self, *args: Any, **options: Any) -> None:
        project = demo_seed(echo=self.stdout.write)
        self.stdout.write(self.style.SUCCESS(f"Demo project ready: /projects/{project.slug}/"))
        logins = ", ".join(["admin (staff)", *DEMO_USERS])
        self.stdout.write(f"Demo logins: {logins}; password for all: {DEMO_PASSWORD}")
