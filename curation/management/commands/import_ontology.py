from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from core.management.base import JobCommand


class Command(JobCommand):
    help = "Import (or update) the AudioSet ontology from ontology.json."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)

    def handle(self, *args: Any, path: Path, **options: Any) -> None:
        self.run_job(
            kind="ontology_import",
            params={"path": str(path.resolve())},
            label=f"Import ontology from {path.name}",
        )
