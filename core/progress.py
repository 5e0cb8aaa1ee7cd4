"""The progress callback every long-running service takes.

A service that reports progress accepts ``progress: ProgressFn = no_progress`` and calls
``progress(done, total, message)``. Under a job it is `core.services.Progress` (which
writes the job row and turns a cancel request into `JobCancelled`); called directly
(tests, the shell) it is `no_progress`, which does nothing.
"""

from __future__ import annotations

from typing import Protocol


class ProgressFn(Protocol):
    """``progress(done, total=None, message="")``: `done` of `total` steps finished."""

    def __call__(self, done: int, total: int | None = None, message: str = "") -> None: ...


def no_progress(done: int, total: int | None = None, message: str = "") -> None:
    """The progress callback of a service called outside a job: reports nowhere."""
