from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from corpus.management.commands._project import project_option
from corpus.models import CorpusStatistics


class Command(JobCommand):
    help = (
        "Compute corpus statistics (AudioCaps Tables 1 and 5) for a project's approved "
        "captions, or for one of its snapshots, with charts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="project slug (optional when there is one project)")
        parser.add_argument("--snapshot", type=int, help="snapshot version")
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="print the statistics as JSON"
        )

    def handle(
        self, *args: Any, project: str | None, snapshot: int | None, as_json: bool, **options: Any
    ) -> None:
        target = project_option(project)
        params: dict[str, Any] = {"project_id": target.pk}
        if snapshot is not None:
            found = target.snapshots.filter(version=snapshot).first()
            if found is None:
                raise CommandError(f"{target.slug} has no snapshot v{snapshot}.")
            params["snapshot_id"] = found.pk
        job = self.run_job(
            kind="corpus_statistics",
            params=params,
            label=f"Statistics of {target.slug}" + (f" v{snapshot}" if snapshot else ""),
            project=target,
        )
        record = CorpusStatistics.objects.get(pk=job.result["statistics"])
        if as_json:
            self.stdout.write(json.dumps(record.data, indent=2))
            return
        for name, row in [*record.data["splits"].items(), ("all", record.data["all"])]:
            self.stdout.write(
                f"{name:>5}: {row['clips']} clips, {row['captions']} captions, "
                f"{row['words_per_caption_mean']:.2f} words/caption "
                f"(median {row['words_per_caption_median']:g}), "
                f"{row['labels_per_clip_mean']:.2f} labels/clip, vocabulary {row['vocabulary']}"
            )
        pos = record.data.get("pos")
        if pos:
            self.stdout.write(
                f"  POS ({pos['pipeline']}): {pos['nouns']} nouns, {pos['verbs']} verbs, "
                f"{pos['adjectives']} adjectives, {pos['adverbs']} adverbs"
            )
        else:
            self.stdout.write(f"  POS: {record.data.get('pos_unavailable', '')}")
