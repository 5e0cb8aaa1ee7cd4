from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from corpus.models import Snapshot
from modeling import services
from modeling.ml.registry import MODELS


class Command(JobCommand):
    help = (
        "Train a captioner on a JSON-lines snapshot, in this process (CUDA when present). "
        "The run appears in the app like one started from its page."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, choices=sorted(MODELS))
        parser.add_argument("--snapshot", required=True, type=int, metavar="ID")
        parser.add_argument(
            "--preset", default="small", help="model size preset: paper, small or tiny"
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
        overrides: list[str],
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
