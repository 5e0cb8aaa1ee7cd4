from __future__ import annotations

from django.apps import AppConfig


class CorpusConfig(AppConfig):
    name = "corpus"
    verbose_name = "Corpus: evaluation, import, versioned exports and statistics"

    def ready(self) -> None:
        from core.execution import job_finished
        from corpus.signals import snapshot_follow_job

        job_finished.connect(snapshot_follow_job, dispatch_uid="corpus.snapshot_follow_job")
