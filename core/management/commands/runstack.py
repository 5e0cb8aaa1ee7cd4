from __future__ import annotations

import shlex
import signal
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.services import process_exit_record
from core.supervisor import Exit, Supervisor, embedded_stack


class Command(BaseCommand):
    help = (
        "Run Earmark's processes on this machine, as `bin/earmark up` does: the embedded "
        "Redis (when CELERY_BROKER_URL is the default), the cpu and gpu workers, beat and the "
        "web server. One that exits is started again after a backoff delay, and its exit is "
        "logged and listed on the jobs page. Ctrl-C or SIGTERM stops them all."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000, help="the web server's port")
        parser.add_argument(
            "--worker-concurrency", type=int, default=2, help="processes of the cpu worker"
        )
        parser.add_argument(
            "--only",
            action="append",
            default=[],
            metavar="NAME",
            help="run only this program (repeatable): redis, worker-cpu, worker-gpu, beat, web",
        )
        parser.add_argument(
            "--prepare",
            action="append",
            default=[],
            metavar="COMMAND",
            help="a management command (with its arguments) to run once the broker answers, "
            "before the workers start, e.g. seed_demo (repeatable, in order)",
        )
        parser.add_argument(
            "--log-dir",
            type=Path,
            default=None,
            help="where each program's log and runstack.log go (default: log/ in the var dir)",
        )
        parser.add_argument(
            "--announce", default="", help="text to print once every program has started"
        )

    def handle(
        self,
        *args: Any,
        port: int,
        worker_concurrency: int,
        only: list[str],
        prepare: list[str],
        announce: str,
        log_dir: Path | None,
        **options: Any,
    ) -> None:
        var_dir = Path(settings.VAR_DIR)
        log_dir = log_dir or var_dir / "log"
        embedded = settings.CELERY_BROKER_URL == settings.EMBEDDED_BROKER_URL
        try:
            programs = embedded_stack(
                var_dir=var_dir,
                log_dir=log_dir,
                port=port,
                embedded_redis_socket=settings.EMBEDDED_REDIS_SOCKET if embedded else None,
                worker_concurrency=worker_concurrency,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        names = [p.name for p in programs]
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise CommandError(f"--only {', '.join(unknown)}: no such program; use {names}")
        if only:
            programs = [p for p in programs if p.name in only]
        log_dir.mkdir(parents=True, exist_ok=True)
        log = (log_dir / "runstack.log").open("a", encoding="utf-8")

        def say(line: str) -> None:
            stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
            print(f"{stamp} runstack: {line}", file=sys.stderr, flush=True)
            log.write(f"{stamp} {line}\n")
            log.flush()

        def run_prepare() -> None:
            for command in prepare:
                say(f"running manage.py {command}")
                call_command(*shlex.split(command))

        if prepare:
            broker = next((p for p in programs if p.name == "redis"), None)
            if broker is not None:  # what the commands queue must reach the broker
                programs[programs.index(broker)] = replace(broker, then=run_prepare)
            else:
                run_prepare()

        def record(exit: Exit) -> None:
            process_exit_record(exit=exit)

        supervisor = Supervisor(programs, on_exit=record, say=say)

        def stop(signum: int, _frame: FrameType | None) -> None:
            say(f"{signal.Signals(signum).name} received")
            supervisor.stopping.set()
            if not supervisor.started.is_set():
                # still starting (a --prepare command may run for minutes): interrupt it;
                # Supervisor.start stops what it started
                raise KeyboardInterrupt

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            supervisor.run(on_started=lambda: self.stdout.write(announce) if announce else None)
        except KeyboardInterrupt:
            pass
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None
        finally:
            say("stopped")
            log.close()
