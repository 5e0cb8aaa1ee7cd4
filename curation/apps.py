from __future__ import annotations

from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"
    verbose_name = "Curation: ontology, clips and subsets"
