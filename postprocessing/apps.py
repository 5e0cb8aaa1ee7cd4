from __future__ import annotations

from django.apps import AppConfig


class PostprocessingConfig(AppConfig):
    name = "postprocessing"
    verbose_name = "Post-processing: caption cleaning, grammar, tokens and vocabulary"

    def ready(self) -> None:
        from core.health import CHECKS
        from postprocessing.health import check_languagetool

        CHECKS["languagetool"] = check_languagetool
