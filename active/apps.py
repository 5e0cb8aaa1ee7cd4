from __future__ import annotations

from django.apps import AppConfig


class ActiveConfig(AppConfig):
    name = "active"
    verbose_name = "Active learning: ranking, flags, pre-suggestions and retraining"
