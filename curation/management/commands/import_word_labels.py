from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from curation.services import word_labels_import


class Command(BaseCommand):
    help = "Map AudioSet labels to hint words (CSV columns: word, super_category, labels)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)

    def handle(self, *args: Any, path: Path, **options: Any) -> None:
        try:
            result = word_labels_import(path=path)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(
            f"{result['words']} word labels covering {result['labels']} AudioSet labels"
        )
