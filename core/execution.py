"""Who runs jobs, and the signal a job's end sends.

Imported when core's app loads (through core.signals), so a Celery worker's parent process
draws its instance id before it forks its pool children, which share it.
"""

from __future__ import annotations

import uuid

from django.dispatch import Signal

# This process's identity in the jobs it runs (Job.runner_instance). A Celery worker's pool
# children are forked from it and share it, so a job names its worker's instance and its own
# pid; a restarted worker gets a new one.
RUNNER_INSTANCE = uuid.uuid4().hex

job_finished = Signal()
"""Sent with job=… inside the transaction that ends a job (succeeded, failed, cancelled):
apps above core keep rows that follow a job (a training run) in step with it."""
