from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:
    from annotation.models import Assignment


class PostprocessingConfig(AppConfig):
    name = "postprocessing"
    verbose_name = "Post-processing: caption cleaning, grammar, tokens and vocabulary"

    def ready(self) -> None:
        from annotation.signals import assignment_approved
        from core.health import CHECKS, cached_probe
        from postprocessing.health import check_languagetool

        CHECKS["languagetool"] = cached_probe("languagetool", check_languagetool)
        assignment_approved.connect(
            _assignment_approved, dispatch_uid="postprocessing.assignment_approved"
        )


def _assignment_approved(sender: type, *, assignment: Assignment, **kwargs: Any) -> None:
    """An approval's captions are post-processed on the text queue once it commits."""
    from postprocessing.services import assignment_postprocess_later

    assignment_postprocess_later(assignment=assignment)
