from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:
    from annotation.models import Assignment
    from modeling.models import TrainingRun


class ActiveConfig(AppConfig):
    name = "active"
    verbose_name = "Active learning: ranking, flags, pre-suggestions and retraining"

    def ready(self) -> None:
        from annotation.prefill import provider_register
        from annotation.signals import assignment_submitted
        from modeling.signals import run_succeeded

        assignment_submitted.connect(
            _assignment_submitted, dispatch_uid="active.assignment_submitted"
        )
        run_succeeded.connect(_run_succeeded, dispatch_uid="active.run_succeeded")
        provider_register(name="active.presuggestions", provider=_presuggested_texts)
        # a submit records edit distances only where suggestions were shown: elsewhere it
        # can store the captions in one statement (annotation.signals.SUBMIT_WRITES_IF)
        from active.models import SUGGESTIONS_SHOWN, Presuggestion
        from annotation.signals import submit_writes_register

        submit_writes_register(
            name=SUGGESTIONS_SHOWN,
            sql=f"EXISTS (SELECT 1 FROM {Presuggestion._meta.db_table} p "
            "WHERE p.assignment_id = a.id)",
        )


def _assignment_submitted(sender: type, *, assignment: Assignment, **kwargs: Any) -> None:
    from active.services import assignment_submitted

    assignment_submitted(assignment=assignment)


def _run_succeeded(sender: type, *, run: TrainingRun, **kwargs: Any) -> None:
    from active.services import retrain_run_finished

    retrain_run_finished(run=run)


def _presuggested_texts(assignment: Assignment) -> dict[int, str]:
    """An edit-mode batch's boxes start from the model's suggestions (never a blind one)."""
    from active.services import presuggested_texts

    return presuggested_texts(assignment=assignment)
