from __future__ import annotations

import textwrap
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser, DjangoHelpFormatter

from core.management.base import JobCommand
from corpus.models import Snapshot
from modeling import services
from modeling.forms import recipe_rows
from modeling.ml.catalog import MODEL_CONFIGS


class _HelpWithRecipes(DjangoHelpFormatter):
    """Django's help layout, with the recipes' epilog kept as written (one per model)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line for line in text.splitlines())


def recipes_epilog() -> str:
    lines = textwrap.wrap(
        "Each model trains with its paper's recipe unless --epochs, --preset or --set change "
        "it (the run records every change):",
        width=100,
    )
    for row in recipe_rows():
        text = f"{row['model']}: {row['paper']}. {row['summary']}"
        lines += textwrap.wrap(text, width=100, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)


class Command(JobCommand):
    help = (
        "Train a captioner on a JSON-lines snapshot, in this process (CUDA when present). "
        "The run appears in the app like one started from its page."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("epilog", recipes_epilog())
        kwargs.setdefault("formatter_class", _HelpWithRecipes)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model",
            required=True,
            choices=sorted(MODEL_CONFIGS),
            help="the captioner; it trains with its paper's recipe (listed below)",
        )
        parser.add_argument("--snapshot", required=True, type=int, metavar="ID")
        parser.add_argument(
            "--recipe",
            default="",
            help="a recipe named by source instead of the paper's, e.g. maac-code (listed "
            "below as 'model (recipe)')",
        )
        parser.add_argument(
            "--preset",
            default="small",
            help="model size preset: paper, small (the default: CPU-sized, recorded as scaled "
            "down) or tiny",
        )
        parser.add_argument(
            "--epochs",
            type=int,
            default=None,
            metavar="N",
            help="scale the recipe to N caption epochs (its other stages and warm-up in "
            "proportion); default: the recipe's",
        )
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            dest="overrides",
            metavar="KEY=VALUE",
            help="override a setting, e.g. train.epochs=5, model.dropout=0.1, features.n_mels=64",
        )

    def handle(
        self,
        *args: Any,
        model: str,
        snapshot: int,
        preset: str,
        epochs: int | None,
        overrides: list[str],
        recipe: str = "",
        **options: Any,
    ) -> None:
        found = Snapshot.objects.select_related("project").filter(pk=snapshot).first()
        if found is None:
            raise CommandError(f"No snapshot with id {snapshot}.")
        try:
            run = services.run_start(
                project=found.project,
                model_name=model,
                snapshot=found,
                created_by=None,
                preset=preset,
                overrides=overrides,
                epochs=epochs,
                recipe=recipe,
                enqueue=False,
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(f"run #{run.pk}: {model} ({preset}) on snapshot v{found.version}")
        self.run_job(
            kind="training_run",
            params={"run_id": run.pk},
            label=f"Train {model} on snapshot v{found.version} (run #{run.pk})",
            project=found.project,
        )
