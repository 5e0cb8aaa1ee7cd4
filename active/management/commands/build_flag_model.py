from __future__ import annotations

from typing import Any

from core.management.base import JobCommand


class Command(JobCommand):
    help = (
        "Learn the disagreement flags' meaning model (word vectors, sound sources, detector) "
        "from the database's captions, ACTIVE_FLAG_MODEL_CAPTIONS and the AudioSet ontology, "
        "and store it under ACTIVE_FLAG_MODEL_DIR (the flags build it on first use if missing)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.run_job(kind="flag_model_build", params={}, label="Build the flag model")
