from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from curation.services import label_counts_refresh


class Command(BaseCommand):
    help = (
        "Recount the ontology page's cached clips per label and AudioSet list from the "
        "clip-label links (after links were changed outside Earmark's imports and admin)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        rows = label_counts_refresh()
        self.stdout.write(f"Recounted clips per label: {rows} label/list counts stored.")
