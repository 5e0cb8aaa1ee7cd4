from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from corpus.evaluation import EvaluationError, check_inputs
from corpus.evaluation_files import FORMATS, EvaluationFileError, read_predictions, read_references
from corpus.management.commands._evaluation import (
    add_common_arguments,
    metrics_option,
    project_option,
    run,
)


class Command(BaseCommand):
    help = (
        "Score predicted captions with BLEU-1..4, METEOR, ROUGE-L, CIDEr-D, SPICE and SPIDEr "
        "(pycocoevalcap) against reference captions from a file, or from a project split's "
        "approved captions (--project SLUG --split test). Files: AudioCaps or Clotho CSV, "
        "id,caption CSV, JSON or JSONL."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--predictions", type=Path, required=True, help="one caption a clip")
        parser.add_argument("--references", type=Path, help="reference captions")
        parser.add_argument("--predictions-format", choices=FORMATS, help="default: guessed")
        parser.add_argument("--references-format", choices=FORMATS, help="default: guessed")
        add_common_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["predictions"]
        refs_path: Path | None = options["references"]
        if (refs_path is None) == (options["project"] is None):
            raise CommandError("Give either --references FILE or --project SLUG --split SPLIT.")
        if options["project"] and not options["split"]:
            raise CommandError("--project needs --split (train, val or test).")
        metrics = metrics_option(options["metrics"])
        try:
            predictions = read_predictions(path, fmt=options["predictions_format"])
            references = (
                read_references(refs_path, fmt=options["references_format"]) if refs_path else None
            )
            if references is not None:
                check_inputs(predictions, references)
        except (EvaluationFileError, EvaluationError) as exc:
            raise CommandError(str(exc)) from None
        project = project_option(options["project"]) if options["project"] else None
        source = refs_path.name if refs_path else f"{options['project']} {options['split']}"
        run(
            self,
            kind="captions_evaluate",
            params={
                "predictions": predictions,
                "references": references,
                "split": options["split"] or "",
                "metrics": metrics,
            },
            label=f"Evaluate {path.name} against {source}",
            project=project,
            as_json=options["json"],
        )
