from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from core.models import Project


class Command(JobCommand):
    help = (
        "Generate SynthScenes (synthetic 10 s scenes with AudioCaps-style captions) as clips "
        "of a project, with a train/val/test subset and imported reference captions."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--train", type=int, required=True, help="train scenes")
        parser.add_argument("--val", type=int, default=0, help="validation scenes (5 captions)")
        parser.add_argument("--test", type=int, default=0, help="test scenes (5 captions)")
        parser.add_argument("--seed", type=int, default=0, help="SynthScenes set (default 0)")
        parser.add_argument(
            "--train-captions", type=int, default=2, help="captions per train clip (1-5)"
        )
        parser.add_argument(
            "--no-video",
            action="store_false",
            dest="video",
            help="store no video hint with the scenes (by default each gets its short MP4)",
        )

    def handle(
        self,
        *args: Any,
        project: str,
        train: int,
        val: int,
        test: int,
        seed: int,
        train_captions: int,
        video: bool = True,
        **options: Any,
    ) -> None:
        try:
            target = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f"No project with slug {project!r}.") from None
        self.run_job(
            kind="synthscenes_make",
            params={
                "train": train,
                "val": val,
                "test": test,
                "seed": seed,
                "train_captions": train_captions,
                "video": video,
            },
            label=f"SynthScenes seed {seed}: {train}/{val}/{test} scenes",
            project=target,
        )
