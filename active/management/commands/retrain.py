from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from active.models import Retrain
from core.management.base import JobCommand
from core.models import Project


class Command(JobCommand):
    help = (
        "Retrain the project's configured model on a fresh snapshot of its approved "
        "captions in this process, and promote the run only if it beats the current one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, metavar="SLUG")

    def handle(self, *args: Any, project: str, **options: Any) -> None:
        found = Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"No project {project!r}.")
        retrain = Retrain.objects.create(
            project=found,
            trigger=Retrain.Trigger.MANUAL,
            reason="manage.py retrain",
            approved_captions=_approved(found),
        )
        job = self.run_job(
            kind="active_retrain",
            params={"retrain_id": retrain.pk},
            label=f"Retrain (manage.py, retrain #{retrain.pk})",
            project=found,
        )
        Retrain.objects.filter(pk=retrain.pk).update(job=job)


def _approved(project: Project) -> int:
    from active.services.retraining import approved_caption_count

    return approved_caption_count(project)
