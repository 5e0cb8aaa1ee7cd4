from __future__ import annotations

from django.apps import AppConfig


class DemoConfig(AppConfig):
    """Seeds every other app, so it sits above them all; it has no models."""

    name = "demo"
    verbose_name = "The offline demo"
