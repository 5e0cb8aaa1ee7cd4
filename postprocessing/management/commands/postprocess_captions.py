from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from core.models import Project


class Command(JobCommand):
    help = (
        "Post-process approved captions (normalise, drop the final period, numbers to words, "
        "LanguageTool grammar, spaCy tokens, training text) and rebuild the vocabulary. "
        "By default: captions never processed, processed by an older pipeline or changed since."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--all", action="store_true", help="re-process every approved caption")
        which.add_argument(
            "--batch", type=int, metavar="N", help="process at most N pending captions"
        )
        parser.add_argument("--project", default="", help="only this project (slug)")

    def handle(self, *args: Any, project: str, batch: int | None, **options: Any) -> None:
        if batch is not None and batch < 1:
            raise CommandError(f"--batch must be at least 1, not {batch}.")
        target = None
        if project:
            target = Project.objects.filter(slug=project).first()
            if target is None:
                raise CommandError(f"No project with slug {project!r}.")
        self.run_job(
            kind="captions_postprocess",
            params={
                "project_id": target.pk if target else None,
                "everything": options["all"],
                "limit": batch,
            },
            label=f"Post-process captions{f' of {target.name}' if target else ''}",
            project=target,
        )
