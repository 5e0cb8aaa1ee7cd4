"""core.supervisor: restarts a program that exits, with backoff, reporting each exit; stops
every program (the broker tier last), killing one that ignores SIGTERM. Programs here are
tiny Python scripts; tests/reliability/test_supervised_stack.py runs the real stack's cpu
worker under `manage.py runstack`."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.supervisor import Backoff, Exit, Program, Supervisor, embedded_stack, tail

FAST = Backoff(first=0.2, factor=2.0, ceiling=1.0, stable=30.0)


def script(tmp_path: Path, name: str, body: str) -> Program:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return Program(name=name, argv=[sys.executable, str(path)], log=tmp_path / f"{name}.log")


def wait_until(condition: Callable[[], object], *, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.05)


@pytest.fixture
def supervise() -> Iterator[Callable[..., tuple[Supervisor, list[Exit]]]]:
    """Runs a Supervisor in a thread, polling every 50 ms; stops it after the test."""
    started: list[tuple[Supervisor, threading.Thread]] = []

    def run(programs: list[Program], **options: object) -> tuple[Supervisor, list[Exit]]:
        exits: list[Exit] = []
        supervisor = Supervisor(
            programs,
            on_exit=exits.append,
            say=lambda _line: None,
            **options,  # type: ignore[arg-type]
        )
        thread = threading.Thread(target=supervisor.run, kwargs={"interval": 0.05})
        thread.start()
        started.append((supervisor, thread))
        wait_until(supervisor.started.is_set)
        return supervisor, exits

    yield run
    for supervisor, thread in started:
        supervisor.stopping.set()
        thread.join(timeout=30)


def test_it_restarts_a_program_that_exits_and_reports_the_exit(
    tmp_path: Path, supervise: Callable[..., tuple[Supervisor, list[Exit]]]
) -> None:
    crasher = script(
        tmp_path,
        "crasher",
        "import time\nprint('about to fail', flush=True)\ntime.sleep(0.3)\nraise SystemExit(3)\n",
    )
    supervisor, exits = supervise([crasher], backoff=FAST)
    first_pid = supervisor.pids()["crasher"]

    wait_until(lambda: len(exits) >= 1 and "crasher" in supervisor.pids())

    assert supervisor.pids()["crasher"] != first_pid
    exit = exits[0]
    assert (exit.program, exit.pid, exit.returncode) == ("crasher", first_pid, 3)
    assert exit.restart_delay == pytest.approx(0.2)
    assert exit.log_tail.endswith("about to fail")
    assert exit.started_at <= exit.exited_at


def test_it_waits_longer_after_each_quick_exit_up_to_the_ceiling(
    tmp_path: Path, supervise: Callable[..., tuple[Supervisor, list[Exit]]]
) -> None:
    crasher = script(tmp_path, "crasher", "raise SystemExit(1)\n")
    _, exits = supervise([crasher], backoff=FAST)

    wait_until(lambda: len(exits) >= 4)

    assert [e.restart_delay for e in exits[:4]] == [0.2, 0.4, 0.8, 1.0]


def test_a_program_that_ran_longer_than_stable_comes_back_after_the_first_delay() -> None:
    backoff = Backoff(first=1.0, factor=2.0, ceiling=60.0, stable=60.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 7, 8)] == [1.0, 2.0, 4.0, 60.0, 60.0]


def test_it_reports_a_program_killed_by_a_signal(
    tmp_path: Path, supervise: Callable[..., tuple[Supervisor, list[Exit]]]
) -> None:
    sleeper = script(tmp_path, "sleeper", "import time\ntime.sleep(300)\n")
    supervisor, exits = supervise([sleeper], backoff=FAST)
    pid = supervisor.pids()["sleeper"]

    os.kill(pid, 9)
    wait_until(lambda: exits and supervisor.pids().get("sleeper", pid) != pid)

    assert (exits[0].pid, exits[0].returncode) == (pid, -9)


def test_stop_ends_every_program_killing_one_that_ignores_sigterm(
    tmp_path: Path, supervise: Callable[..., tuple[Supervisor, list[Exit]]]
) -> None:
    polite = script(tmp_path, "polite", "import time\ntime.sleep(300)\n")
    stubborn = script(
        tmp_path,
        "stubborn",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\ntime.sleep(300)\n",
    )
    supervisor, exits = supervise([polite, stubborn], stop_timeout=1.0)
    wait_until(lambda: tail(stubborn.log).endswith("ready"))
    pids = supervisor.pids()

    started = time.monotonic()
    supervisor.stop()

    assert time.monotonic() - started < 10
    assert supervisor.pids() == {}
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert exits == []  # a stop is no death: nothing reported, nothing restarted


def test_the_broker_stops_after_the_programs_started_after_it(
    tmp_path: Path, supervise: Callable[..., tuple[Supervisor, list[Exit]]]
) -> None:
    """Workers finishing their warm shutdown still need the broker: programs started after
    one with a readiness probe get SIGTERM first, and it only once they are gone."""
    record = (
        "import signal, sys, time\n"
        "def bye(*_):\n"
        "    time.sleep({pause})\n"
        "    print(repr(time.monotonic()), flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('up', flush=True)\n"
        "while True: time.sleep(1)\n"
    )
    broker = script(tmp_path, "broker", record.format(pause=0))
    broker = Program(
        name=broker.name,
        argv=broker.argv,
        log=broker.log,
        ready=lambda: tail(broker.log).endswith("up"),
    )
    worker = script(tmp_path, "worker", record.format(pause=0.5))
    supervisor, _ = supervise([broker, worker])
    wait_until(lambda: tail(worker.log).endswith("up"))

    supervisor.stop()

    assert float(tail(worker.log, lines=1)) < float(tail(broker.log, lines=1))


def test_it_stops_what_it_started_when_a_program_never_gets_ready(tmp_path: Path) -> None:
    first = script(tmp_path, "first", "import time\ntime.sleep(300)\n")
    never = script(tmp_path, "never", "import time\ntime.sleep(300)\n")
    never = Program(name=never.name, argv=never.argv, log=never.log, ready=lambda: False)
    supervisor = Supervisor([first, never], say=lambda _line: None, ready_timeout=0.5)

    with pytest.raises(RuntimeError, match=r"never did not answer within 0\.5 s"):
        supervisor.start()

    assert supervisor.pids() == {}


def test_the_embedded_stack_runs_redis_on_the_socket_first(tmp_path: Path) -> None:
    socket = tmp_path / "redis" / "redis.sock"
    programs = embedded_stack(
        var_dir=tmp_path,
        log_dir=tmp_path,
        port=8123,
        embedded_redis_socket=socket,
        worker_concurrency=3,
    )
    assert [p.name for p in programs] == ["redis", "worker-cpu", "worker-gpu", "beat", "web"]
    redis = programs[0].argv
    assert redis[redis.index("--unixsocket") + 1] == str(socket)
    assert redis[redis.index("--port") + 1] == "0"
    assert "default,media,text" in programs[1].argv
    assert programs[1].argv[programs[1].argv.index("-c") + 1] == "3"
    assert "127.0.0.1:8123" in programs[-1].argv


def test_the_embedded_stack_needs_no_redis_of_its_own_with_another_broker(tmp_path: Path) -> None:
    programs = embedded_stack(
        var_dir=tmp_path,
        log_dir=tmp_path,
        port=8000,
        embedded_redis_socket=None,
        worker_concurrency=2,
    )
    assert [p.name for p in programs] == ["worker-cpu", "worker-gpu", "beat", "web"]


def test_it_names_a_var_dir_too_deep_for_a_unix_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 120) / "redis.sock"
    with pytest.raises(ValueError, match=r"longer than 107 bytes.*EARMARK_VAR_DIR"):
        embedded_stack(
            var_dir=tmp_path,
            log_dir=tmp_path,
            port=8000,
            embedded_redis_socket=deep,
            worker_concurrency=2,
        )
