from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Projects, people and jobs"

    def ready(self) -> None:
        from core import roles, signals  # noqa: F401  (connect signal handlers)

        roles.connect()
