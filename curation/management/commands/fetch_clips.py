from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from curation.models import Subset


class Command(JobCommand):
    help = (
        "Fetch the clips of a subset (or single clips) from YouTube: a 10 s WAV, a 144p video "
        "hint and waveform peaks each. Resumable; ready clips are never fetched again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--subset", metavar="SLUG", help="fetch this subset's clips")
        parser.add_argument("--project", metavar="SLUG", help="the subset's project")
        parser.add_argument(
            "--clip",
            action="append",
            type=int,
            default=[],
            metavar="ID",
            help="fetch this clip (repeatable; with --subset, only clips of the subset)",
        )
        parser.add_argument(
            "--retry-exhausted",
            action="store_true",
            help="give failed clips that used up FETCH_MAX_ATTEMPTS a fresh set of attempts",
        )
        parser.add_argument(
            "--fan-out",
            action="store_true",
            help="also hand clips to running media workers, fetching in parallel",
        )

    def handle(
        self,
        *args: Any,
        subset: str | None,
        project: str | None,
        clip: list[int],
        fan_out: bool,
        retry_exhausted: bool,
        **options: Any,
    ) -> None:
        if not subset and not clip:
            raise CommandError("Name a subset (--subset SLUG) or clips (--clip ID).")
        found = None
        if subset:
            found = _find_subset(subset, project)
        self.run_job(
            kind="clips_fetch",
            params={
                "subset_id": found.pk if found else None,
                "clip_ids": clip or None,
                "fan_out": fan_out,
                "retry_exhausted": retry_exhausted,
            },
            label=f"Fetch clips of {found.name}" if found else f"Fetch {len(clip)} clip(s)",
            project=found.project if found else None,
        )


def _find_subset(slug: str, project: str | None) -> Subset:
    subsets = Subset.objects.select_related("project").filter(slug=slug)
    if project:
        subsets = subsets.filter(project__slug=project)
    found = list(subsets[:10])
    if not found:
        where = f" in project {project!r}" if project else ""
        raise CommandError(f"No subset {slug!r}{where}.")
    if len(found) > 1:
        projects = ", ".join(sorted(s.project.slug for s in found))
        raise CommandError(f"Subset {slug!r} exists in projects {projects}; add --project.")
    return found[0]
