from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from corpus.evaluation_files import EvaluationFileError, read_references
from corpus.management.commands._evaluation import (
    add_common_arguments,
    metrics_option,
    project_option,
    run,
)


class Command(BaseCommand):
    help = (
        "The human upper bound of a caption set (the AudioCaps paper's 'Human' row): each of "
        "a clip's N references in turn is scored against the other N-1, and the N rounds are "
        "averaged. From an AudioCaps or Clotho CSV, or a project split's approved captions."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, nargs="?", help="an AudioCaps or Clotho CSV")
        parser.add_argument("--format", choices=("audiocaps", "clotho"), help="the file's shape")
        add_common_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path | None = options["path"]
        if (path is None) == (options["project"] is None):
            raise CommandError("Give either PATH --format audiocaps|clotho or --project SLUG.")
        if path is not None and not options["format"]:
            raise CommandError("PATH needs --format audiocaps or --format clotho.")
        if options["project"] and not options["split"]:
            raise CommandError("--project needs --split (train, val or test).")
        metrics = metrics_option(options["metrics"])
        references = None
        if path is not None:
            try:
                references = read_references(path, fmt=options["format"])
            except EvaluationFileError as exc:
                raise CommandError(str(exc)) from None
        project = project_option(options["project"]) if options["project"] else None
        source = path.name if path else f"{options['project']} {options['split']}"
        result = run(
            self,
            kind="captions_human_bound",
            params={"references": references, "split": options["split"] or "", "metrics": metrics},
            label=f"Human upper bound of {source}",
            project=project,
            as_json=options["json"],
        )
        if not options["json"]:
            sizes = ", ".join(f"{c} with {n}" for n, c in result["references_per_clip"].items())
            self.stdout.write(
                f"{result['clips']} clips ({sizes} references), {len(result['rounds'])} rounds; "
                f"{result['skipped']} clips with a single reference skipped"
            )
