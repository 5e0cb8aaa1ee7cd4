from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.services import batch_publish
from curation.models import Split, Subset


class Command(BaseCommand):
    help = "Publish a batch of captioning HITs from one split of a subset."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--subset", required=True, help="subset slug")
        parser.add_argument("--project", default="", help="project slug, if the slug is shared")
        parser.add_argument("--split", required=True, choices=Split.values)
        parser.add_argument("--name", default="", help="default: '<subset> <split>'")
        parser.add_argument(
            "--captions",
            type=int,
            default=None,
            help="per clip; default: the subset's recipe (AudioCaps: 1 train, 5 val/test)",
        )
        parser.add_argument("--clips-per-hit", type=int, default=5)
        parser.add_argument("--reward-cents", type=int, default=20, help="per HIT")
        parser.add_argument("--time-allotted", type=int, default=1800, help="seconds")
        parser.add_argument("--lifetime", type=float, default=168, help="hours")
        parser.add_argument("--auto-approve", type=float, default=72, help="hours")
        parser.add_argument("--min-words", type=int, default=3)
        parser.add_argument("--max-words", type=int, default=40)
        parser.add_argument("--draft", action="store_true", help="create without publishing")

    def handle(self, *args: Any, **opts: Any) -> None:
        subsets = Subset.objects.filter(slug=opts["subset"]).select_related("project")
        if opts["project"]:
            subsets = subsets.filter(project__slug=opts["project"])
        found = list(subsets[:2])
        if len(found) != 1:
            problem = "No subset" if not found else "Several subsets"
            raise CommandError(f"{problem} with slug {opts['subset']!r}; pass --project.")
        subset = found[0]
        try:
            batch = batch_publish(
                subset=subset,
                split=opts["split"],
                name=opts["name"] or f"{subset.name} {opts['split']}",
                captions_per_clip=opts["captions"],
                clips_per_hit=opts["clips_per_hit"],
                reward_cents=opts["reward_cents"],
                time_allotted=timedelta(seconds=opts["time_allotted"]),
                lifetime=timedelta(hours=opts["lifetime"]),
                auto_approve_delay=timedelta(hours=opts["auto_approve"]),
                min_words=opts["min_words"],
                max_words=opts["max_words"],
                created_by=None,  # the shell is trusted; the web form checks the role
                publish=not opts["draft"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(
            f"batch #{batch.pk} {batch.name!r}: {batch.state}, {batch.hits.count()} HITs, "
            f"{batch.captions_per_clip} captions per clip"
        )
