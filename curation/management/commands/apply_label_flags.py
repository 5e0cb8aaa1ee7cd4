from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.models import Project
from curation import audiocaps
from curation.services import label_flags_apply


class Command(BaseCommand):
    help = (
        "Set a flag set's curation flags (CSV columns: mid, name, flag, reason) on a "
        "project's labels; by default the bundled AudioCaps flags (visual-only and "
        "expert-only labels). Idempotent; clears no flag."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument(
            "path", type=Path, nargs="?", default=audiocaps.FLAG_SET, help="default: AudioCaps'"
        )

    def handle(self, *args: Any, project: str, path: Path, **options: Any) -> None:
        found = Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"No project with slug {project!r}.")
        try:
            result = label_flags_apply(project=found, path=path)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(
            f"{result['labels']} labels flagged in {found.slug} ({result['changed']} changed)"
        )
