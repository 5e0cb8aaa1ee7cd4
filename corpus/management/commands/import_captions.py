from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from core.management.base import JobCommand
from corpus.management.commands._project import project_option
from corpus.models import CorpusFormat
from curation.models import Split


class Command(JobCommand):
    help = (
        "Import an AudioCaps or Clotho caption CSV into a project as approved, imported "
        "captions (clips are created as needed and put into the project's import subset with "
        "the split). Idempotent; a malformed file is refused with its line and nothing is written."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--format", required=True, choices=CorpusFormat.values)
        parser.add_argument("--split", required=True, choices=Split.values)
        parser.add_argument("--project", help="project slug (optional when there is one project)")

    def handle(
        self, *args: Any, path: Path, format: str, split: str, project: str | None, **options: Any
    ) -> None:
        target = project_option(project)
        self.run_job(
            kind="captions_import",
            params={
                "project_id": target.pk,
                "path": str(path.resolve()),
                "format": format,
                "split": split,
            },
            label=f"Import {format} captions ({split}) from {path.name}",
            project=target,
        )
