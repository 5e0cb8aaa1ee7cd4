"""What the supervisor of `bin/earmark up` (core.supervisor, run by `manage.py runstack`)
writes to the database: each process of the stack that ended while it ran."""

from __future__ import annotations

from django.db import close_old_connections

from core.models import ProcessExit
from core.supervisor import Exit


def process_exit_record(*, exit: Exit) -> ProcessExit:
    """Stores one exit for the jobs page. The supervisor lives for days between writes, so
    a connection the database dropped meanwhile is replaced first."""
    close_old_connections()
    return ProcessExit.objects.create(
        program=exit.program,
        pid=exit.pid,
        returncode=exit.returncode,
        started_at=exit.started_at,
        exited_at=exit.exited_at,
        restart_delay=exit.restart_delay,
        log_tail=exit.log_tail,
    )
