from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from active.services.curve import curve_import
from core.models import Project


class Command(BaseCommand):
    help = (
        "Load a simulation's learning curves (benchmarks/active_learning.py --json OUT) into "
        "a project's learning-curve page."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--project", required=True, metavar="SLUG")

    def handle(self, *args: Any, path: Path, project: str, **options: Any) -> None:
        found = Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"No project {project!r}.")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CommandError(f"{path}: {exc}") from None
        if not isinstance(data, dict):
            raise CommandError(f"{path}: expected a JSON object.")
        try:
            n = curve_import(project=found, user=None, data=data)
        except ValidationError as exc:
            raise CommandError(f"{path}: {' '.join(exc.messages)}") from None
        self.stdout.write(self.style.SUCCESS(f"{n} point(s) imported into {found.slug}."))
