"""This process as a runner of jobs: its identity in the jobs it runs, and the signal sent
when a job ends. Kept apart from core.signals (the worker hooks, which call services) so that
core.services can import it without an import cycle."""

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
