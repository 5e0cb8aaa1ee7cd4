from __future__ import annotations

from django.apps import AppConfig


class ModelingConfig(AppConfig):
    name = "modeling"
    verbose_name = "Modeling: features, captioners and training runs"
