from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.models import Job
from core.services import JobCancelled, Progress
from modeling import training
from modeling.ml import distributed
from modeling.models import TrainingRun


class Command(BaseCommand):
    help = (
        "Execute a recorded training run in this process. The gpu worker starts it under "
        "torchrun (one process per GPU) for data-parallel training; rank 0 reports to the run "
        "and to --job, and stops when the job is cancelled."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run", type=int, metavar="RUN_ID")
        parser.add_argument("--job", type=int, metavar="ID", help="the job to report progress to")
        parser.add_argument("--resume", action="store_true", help="continue from last.pt")
        parser.add_argument(
            "--work-dir", type=Path, help="folder shared by the ranks (made by the launcher)"
        )

    def handle(
        self,
        *args: Any,
        run: int,
        job: int | None,
        resume: bool,
        work_dir: Path | None,
        **options: Any,
    ) -> None:
        found = TrainingRun.objects.select_related("snapshot", "project").filter(pk=run).first()
        if found is None:
            raise CommandError(f"No training run with id {run}.")
        if resume and found.state == TrainingRun.State.SUCCEEDED:
            # as modeling.services.run_resume: resuming would overwrite its steps and scores
            raise CommandError(
                f"Run #{run} succeeded; a finished run does not resume. Start a new run from "
                "its checkpoint instead."
            )
        the_job = Job.objects.filter(pk=job).first() if job is not None else None
        if job is not None and the_job is None:
            raise CommandError(f"No job with id {job}.")
        world = distributed.setup()
        try:
            reporting = {"progress": _progress(the_job)} if the_job and world.is_main else {}
            finished = training.run_execute(
                run=found, job=the_job, resume=resume, work_dir=work_dir, **reporting
            ).run
        finally:
            distributed.teardown()
        if world.is_main:
            self.stdout.write(f"run #{finished.pk}: {finished.state} ({finished.stopped})")


def _progress(job: Job) -> Any:
    """The job's progress reporter, minus its cancel exception: the trainer polls the job's
    cancel flag at every batch and stops all ranks together, where an exception on rank 0
    alone would leave the others waiting."""
    report = Progress(job)

    def progress(done: int, total: int | None = None, message: str = "") -> None:
        with contextlib.suppress(JobCancelled):
            report(done, total, message)

    return progress
