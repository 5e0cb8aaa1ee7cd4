from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from core.management.base import JobCommand
from curation.models import Clip


class Command(JobCommand):
    help = "Import an AudioSet segment list CSV (one transaction per file)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--source", required=True, choices=Clip.SegmentList.values)

    def handle(self, *args: Any, paths: list[Path], source: str, **options: Any) -> None:
        for path in paths:
            self.run_job(
                kind="segments_import",
                params={"path": str(path.resolve()), "segment_list": source},
                label=f"Import {source} segments from {path.name}",
            )
