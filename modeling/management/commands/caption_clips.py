from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from curation.models import Subset
from modeling.models import TrainingRun


class Command(JobCommand):
    help = (
        "Suggest captions for clips with a finished run's model (beam search), storing each "
        "clip's best caption, its log-probability and token entropy."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", required=True, type=int, metavar="ID")
        parser.add_argument("--clips", nargs="+", type=int, default=None, metavar="ID")
        parser.add_argument("--subset", metavar="SLUG", help="a subset of the run's project")
        parser.add_argument(
            "--beam-size",
            type=int,
            default=None,
            help="beam width (1: greedy); default: the run's recipe's (decoding.beam_size)",
        )

    def handle(
        self,
        *args: Any,
        run: int,
        clips: list[int] | None,
        subset: str | None,
        beam_size: int | None,
        **options: Any,
    ) -> None:
        found = TrainingRun.objects.select_related("project").filter(pk=run).first()
        if found is None:
            raise CommandError(f"No training run with id {run}.")
        subset_id = None
        if subset:
            match = Subset.objects.filter(project=found.project, slug=subset).first()
            if match is None:
                raise CommandError(f"No subset {subset!r} in project {found.project.slug!r}.")
            subset_id = match.pk
        if clips is None and subset_id is None:
            raise CommandError("Name clips (--clips ID …) or a subset (--subset SLUG).")
        self.run_job(
            kind="clips_caption",
            params={
                "run_id": found.pk,
                "clip_ids": clips,
                "subset_id": subset_id,
                "beam_size": beam_size,
            },
            label=f"Suggest captions with run #{found.pk}",
            project=found.project,
        )
