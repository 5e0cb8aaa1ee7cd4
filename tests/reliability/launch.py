"""Starts a process the reliability tests inject faults into, with their job kinds known:

python -m tests.reliability.launch celery -A earmark worker …   a Celery worker
python -m tests.reliability.launch manage run_job ID            a management command
"""

from __future__ import annotations

import signal
import sys


def main(argv: list[str]) -> None:
    # Ctrl-C reaches these processes as it reaches one started from a terminal: an ignored
    # SIGINT is inherited across exec, and Python then never raises KeyboardInterrupt (the
    # full suite's test process had one ignored; the Ctrl-C fault test then timed out).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import django

    django.setup()
    from tests.reliability.kinds import register

    register("unused-in-this-process")  # a worker reads the queue from its -Q, not the kind
    program, *args = argv
    if program == "celery":
        from celery.bin.celery import main as celery_main

        sys.argv = ["celery", *args]
        celery_main()
    elif program == "manage":
        from django.core.management import execute_from_command_line

        execute_from_command_line(["manage.py", *args])
    else:
        raise SystemExit(f"unknown program {program!r}; use celery or manage")


if __name__ == "__main__":
    main(sys.argv[1:])
