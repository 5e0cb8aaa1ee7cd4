from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from core.models import SampleRate

AUDIO_SUFFIXES = {".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".webm", ".mp4"}


class Command(JobCommand):
    help = "Import local audio files (or every audio file in a folder) as clips."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path)
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
            default=SampleRate.KHZ_32,
            help="WAV sample rate to store (default 32000; use the project's rate)",
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
        sample_rate: int,
        **options: Any,
    ) -> None:
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
        )
