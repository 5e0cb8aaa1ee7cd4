from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from core.models import Project, SampleRate

AUDIO_SUFFIXES = {".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".webm", ".mp4"}


class Command(JobCommand):
    help = (
        "Import local audio files (or every audio file in a folder) as clips of a project "
        "(--project), or as site-wide clips that no project sees until staff put them into "
        "one of its subsets."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument(
            "--project",
            default="",
            metavar="SLUG",
            help="the project that owns the clips (its sample rate unless --sample-rate)",
        )
        parser.add_argument(
            "--label",
            action="append",
            default=[],
            metavar="MID",
            help="AudioSet id to attach to every imported clip (repeatable)",
        )
        parser.add_argument(
            "--sample-rate",
            type=int,
            choices=SampleRate.values,
            default=None,
            help="WAV sample rate to store (default: the project's, else 32000)",
        )
        parser.add_argument(
            "--skip-broken",
            action="store_true",
            help="import the readable files and report the broken ones",
        )

    def handle(
        self,
        *args: Any,
        paths: list[Path],
        label: list[str],
        skip_broken: bool,
        sample_rate: int | None,
        project: str,
        **options: Any,
    ) -> None:
        owner = Project.objects.filter(slug=project).first() if project else None
        if project and owner is None:
            raise CommandError(f"No project {project!r}.")
        if sample_rate is None:
            sample_rate = owner.audio_sample_rate if owner else SampleRate.KHZ_32
        files: list[Path] = []
        for path in paths:
            if path.is_dir():
                files += sorted(p for p in path.iterdir() if p.suffix.lower() in AUDIO_SUFFIXES)
            else:
                files.append(path)
        if not files:
            raise CommandError("No audio files found in the given paths.")
        self.run_job(
            kind="clips_import_local",
            params={
                "paths": [str(f.resolve()) for f in files],
                "labels": {f.name: label for f in files} if label else {},
                "skip_broken": skip_broken,
                "sample_rate": sample_rate,
            },
            label=f"Import {len(files)} local audio file(s)",
            project=owner,
        )
