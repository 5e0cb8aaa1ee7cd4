from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from corpus.management.commands._project import project_option
from corpus.models import Snapshot
from corpus.services import snapshot_create, snapshot_label
from curation.models import Split


class Command(JobCommand):
    help = (
        "Export the project's approved captions as a new numbered snapshot (stored as a zip "
        "with a manifest) and write its files into --out; --with-audio adds the clips' audio "
        "(Clotho layout for --format clotho, Hugging Face audiofolder otherwise) and a "
        "dataset card."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=Snapshot.Format.values)
        parser.add_argument("--out", required=True, type=Path, help="folder for the files")
        parser.add_argument("--project", help="project slug (optional when there is one project)")
        parser.add_argument("--text", default="raw", choices=Snapshot.Text.values)
        parser.add_argument(
            "--split", action="append", choices=Split.values, help="repeat; default: all three"
        )
        parser.add_argument(
            "--with-audio", action="store_true", help="pack the clips' audio and a dataset card"
        )
        parser.add_argument(
            "--licence",
            default=Snapshot.Licence.CC_BY_4,
            choices=Snapshot.Licence.values,
            help="of the captions and metadata, written into the card (default cc-by-4.0)",
        )

    def handle(
        self,
        *args: Any,
        format: str,
        out: Path,
        project: str | None,
        text: str,
        split: list[str] | None,
        with_audio: bool,
        licence: str,
        **options: Any,
    ) -> None:
        target = project_option(project)
        if out.exists() and any(out.iterdir()):
            raise CommandError(f"{out} is not empty; choose a new or empty folder.")
        try:
            snapshot = snapshot_create(
                project=target,
                fmt=format,
                text=text,
                splits=split or list(Split.values),
                with_audio=with_audio,
                licence=licence,
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.run_job(
            kind="snapshot_build",
            params={"snapshot_id": snapshot.pk, "out_dir": str(out.resolve())},
            label=snapshot_label(snapshot),
            project=target,
        )
        snapshot.refresh_from_db()
        for entry in snapshot.files:
            self.stdout.write(f"  {out / str(entry['path'])}  {entry['captions']} captions")
        if snapshot.with_audio:
            audio = snapshot.manifest["audio"]
            self.stdout.write(f"  {audio['files']:,} audio files ({audio['layout']} layout)")
            if snapshot.missing_audio:
                self.stdout.write(
                    self.style.WARNING(
                        f"  {snapshot.missing_audio:,} clips left out without readable audio: "
                        f"see {out / 'missing_audio.csv'}"
                    )
                )
        self.stdout.write(f"snapshot v{snapshot.version}: {snapshot.archive.name}")
