from __future__ import annotations

from django.apps import AppConfig


class ModelingConfig(AppConfig):
    name = "modeling"
    verbose_name = "Modeling: features, captioners and training runs"

    def ready(self) -> None:
        from core.execution import job_finished
        from modeling.signals import run_follow_job

        job_finished.connect(run_follow_job, dispatch_uid="modeling.run_follow_job")
