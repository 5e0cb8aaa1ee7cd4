from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from corpus.services import snapshots_sweep


class Command(BaseCommand):
    help = (
        "Fail snapshots left building by a build that stopped, and remove the temporary "
        "archives, unreferenced archives and work folders interrupted builds left behind."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=None,
            metavar="SECONDS",
            help="remove leftovers at least this old (default: SNAPSHOT_ORPHAN_SECONDS)",
        )

    def handle(self, *args: Any, older_than: float | None, **options: Any) -> None:
        done = snapshots_sweep(older_than=older_than)
        self.stdout.write(
            f"{done['failed']} building snapshot(s) failed, "
            f"{done['partial_archives']} temporary archive(s), "
            f"{done['orphan_archives']} unreferenced archive(s) and "
            f"{done['work_folders']} work folder(s) removed."
        )
