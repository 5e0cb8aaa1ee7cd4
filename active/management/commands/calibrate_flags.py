from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from core.models import Project


class Command(JobCommand):
    help = (
        "Refit a project's flag probabilities from its reviewers' approve/reject decisions and "
        "record the flags' precision and recall against them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, metavar="SLUG")

    def handle(self, *args: Any, project: str, **options: Any) -> None:
        found = Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"No project with slug {project!r}.")
        self.run_job(
            kind="flags_calibrate",
            params={"project_id": found.pk},
            label="Refit the flags' calibration from reviews",
            project=found,
        )
