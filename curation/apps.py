from __future__ import annotations

from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"
    verbose_name = "Curation: ontology, clips and subsets"

    def ready(self) -> None:
        from curation import signals  # noqa: F401  (keeps the label counts cache in step)
