from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from curation import audiocaps as audiocaps_module
from curation.services import word_labels_import


class Command(BaseCommand):
    help = (
        "Map AudioSet labels to hint words (CSV columns: word, super_category, labels); "
        "--audiocaps imports the bundled AudioCaps word labels (the paper's Figure 7)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, nargs="?")
        parser.add_argument(
            "--audiocaps", action="store_true", help=f"import {audiocaps_module.WORD_LABELS.name}"
        )

    def handle(self, *args: Any, path: Path | None, audiocaps: bool, **options: Any) -> None:
        if (path is None) == (not audiocaps):
            raise CommandError("Give a CSV file or --audiocaps (not both).")
        try:
            result = word_labels_import(path=path or audiocaps_module.WORD_LABELS)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(
            f"{result['words']} word labels covering {result['labels']} AudioSet labels"
        )
