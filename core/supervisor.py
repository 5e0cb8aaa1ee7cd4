"""A small process supervisor: what `bin/earmark up` runs (`manage.py runstack`).

It starts each program in order (waiting until one with a readiness probe answers, as the
broker must before workers connect), restarts any that exits on its own after a backoff
delay, reports each exit to a callback (runstack records it for the jobs page), and on
stop sends SIGTERM to the programs that need the broker, then SIGKILL to what is left, and
only then stops the broker the same way. Each
program runs in its own session, so a Ctrl-C in the terminal reaches the supervisor only
and the stop is one orderly sequence; on Linux each also gets SIGTERM if the supervisor
itself is killed, so no half stack outlives it.

No Django here: runstack builds the programs from the settings (`embedded_stack`) and
passes the callback that writes core.ProcessExit.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

# sockaddr_un.sun_path holds 108 bytes with the terminating NUL
UNIX_SOCKET_PATH_MAX = 107


@dataclass(frozen=True)
class Program:
    name: str  # also its log's name: <log_dir>/<name>.log
    argv: Sequence[str]
    log: Path
    env: Mapping[str, str] = field(default_factory=dict)  # on top of the supervisor's own
    # polled after a start until it returns True, before the next program starts
    ready: Callable[[], bool] | None = None
    # run once, after the first start's readiness, before the next program starts
    then: Callable[[], None] | None = None


@dataclass(frozen=True)
class Exit:
    program: str
    pid: int
    returncode: int  # negative: killed by that signal
    started_at: datetime
    exited_at: datetime
    restart_delay: float  # seconds until the supervisor starts it again
    log_tail: str


@dataclass(frozen=True)
class Backoff:
    """Delay before restarting a program that exited: `first` seconds, times `factor` for
    each exit in a row that came sooner than `stable` seconds after its start, at most
    `ceiling`. A program that crashes at once is not restarted in a tight loop; one that
    ran for a while comes back after `first`."""

    first: float = 1.0
    factor: float = 2.0
    ceiling: float = 60.0
    stable: float = 60.0

    def delay(self, quick_exits: int) -> float:
        return min(self.ceiling, self.first * self.factor ** max(0, quick_exits - 1))


@dataclass
class _Running:
    program: Program
    process: subprocess.Popen[bytes] | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    started_mono: float = 0.0
    quick_exits: int = 0
    restart_at: float | None = None  # monotonic time of the next start, while it is down


# Looked up here, not in the forked child, where only async-signal-safe calls belong.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the supervisor dies, even by SIGKILL."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def tail(path: Path, *, lines: int = 20, max_bytes: int = 8192) -> str:
    """The last `lines` lines of a log (its last `max_bytes` at most)."""
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - max_bytes))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Supervisor:
    def __init__(
        self,
        programs: Sequence[Program],
        *,
        on_exit: Callable[[Exit], None] = lambda _exit: None,
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
        backoff: Backoff | None = None,
        ready_timeout: float = 60.0,
        stop_timeout: float = 20.0,
    ) -> None:
        names = [p.name for p in programs]
        if len(set(names)) != len(names):
            raise ValueError(f"program names must differ: {', '.join(names)}")
        self.programs = [_Running(program=p) for p in programs]
        self.on_exit = on_exit
        self.say = say
        self.backoff = backoff or Backoff()
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.stopping = threading.Event()
        self.started = threading.Event()  # every program started (and `then` run) once

    def pids(self) -> dict[str, int]:
        """Each running program's pid, by name."""
        return {
            r.program.name: r.process.pid
            for r in self.programs
            if r.process is not None and r.process.poll() is None
        }

    def _start(self, running: _Running) -> None:
        program = running.program
        program.log.parent.mkdir(parents=True, exist_ok=True)
        with program.log.open("ab") as log:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            log.write(f"=== runstack: starting {program.name} at {stamp}\n".encode())
            log.flush()
            running.process = subprocess.Popen(
                list(program.argv),
                env={**os.environ, **program.env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C goes to the supervisor, which stops all
                preexec_fn=_die_with_parent,
            )
        running.started_at = datetime.now(UTC)
        running.started_mono = time.monotonic()
        running.restart_at = None
        self.say(f"{program.name} started (pid {running.process.pid}), log {program.log}")
        if program.ready is not None:
            self._wait_ready(running)

    def _wait_ready(self, running: _Running) -> None:
        program, process = running.program, running.process
        assert program.ready is not None
        assert process is not None
        deadline = time.monotonic() + self.ready_timeout
        while not program.ready():
            if process.poll() is not None or time.monotonic() > deadline:
                why = (
                    f"exited with {process.returncode}"
                    if process.returncode is not None
                    else f"did not answer within {self.ready_timeout:g} s"
                )
                raise RuntimeError(
                    f"{program.name} {why}; the end of {program.log}:\n{tail(program.log)}"
                )
            if self.stopping.wait(0.1):
                return

    def start(self) -> None:
        """Starts every program in order; raises RuntimeError (after stopping what it
        started) when one with a readiness probe never gets ready."""
        try:
            for running in self.programs:
                if self.stopping.is_set():
                    return
                self._start(running)
                if running.program.then is not None:
                    running.program.then()
            self.started.set()
        except BaseException:
            self.stop()
            raise

    def poll(self) -> None:
        """Notes programs that exited and starts those whose backoff delay has passed."""
        now = time.monotonic()
        for running in self.programs:
            process = running.process
            if self.stopping.is_set():
                return
            if process is not None and process.poll() is not None:
                if self.stopping.is_set():  # stopped by stop(), not dead
                    return
                self._exited(running, process, now)
            elif running.restart_at is not None and now >= running.restart_at:
                self.say(f"restarting {running.program.name}")
                try:
                    self._start(running)
                except RuntimeError as exc:  # not ready in time: it counts as one more exit
                    self.say(str(exc))
                    if running.process is not None and running.process.poll() is None:
                        self._kill(running.process)

    def _exited(self, running: _Running, process: subprocess.Popen[bytes], now: float) -> None:
        program = running.program
        # What it left in its session goes too: a prefork worker's pool children outlive
        # their parent for a moment, holding its broker connection, into which Redis would
        # hand a message nobody then runs.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if now - running.started_mono < self.backoff.stable:
            running.quick_exits += 1
        else:
            running.quick_exits = 1
        delay = self.backoff.delay(running.quick_exits)
        running.process = None
        running.restart_at = now + delay
        exit = Exit(
            program=program.name,
            pid=process.pid,
            returncode=process.returncode,
            started_at=running.started_at,
            exited_at=datetime.now(UTC),
            restart_delay=delay,
            log_tail=tail(program.log),
        )
        ending = (
            f"was killed by {signal.Signals(-process.returncode).name}"
            if process.returncode < 0 and -process.returncode in signal.valid_signals()
            else f"exited with code {process.returncode}"
        )
        self.say(
            f"{program.name} (pid {process.pid}) {ending}; restarting it in {delay:g} s. "
            f"The end of {program.log}:\n{exit.log_tail}"
        )
        try:
            self.on_exit(exit)
        except Exception as exc:  # recording it must not stop the restart
            self.say(f"recording the exit of {program.name} failed: {exc}")

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL to the program's whole session (a prefork worker's children too)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.say(f"pid {process.pid} survived SIGKILL")

    def _tiers(self) -> list[list[_Running]]:
        """The programs in stop order: a program with a readiness probe (the broker) is one
        the programs started after it need, so those stop first, together, and it after."""
        tiers: list[list[_Running]] = [[]]
        for running in self.programs:
            if running.program.ready is not None and tiers[-1]:
                tiers.append([])
            tiers[-1].append(running)
            if running.program.ready is not None:
                tiers.append([])
        return [tier for tier in reversed(tiers) if tier]

    def stop(self) -> None:
        """Stops every program: SIGTERM to the programs started after the last one with a
        readiness probe, SIGKILL to any still running `stop_timeout` seconds later, then
        the same for that one and those before it. Idempotent."""
        self.stopping.set()
        for tier in self._tiers():
            alive = [r for r in tier if r.process is not None and r.process.poll() is None]
            if alive:
                self.say("stopping " + ", ".join(r.program.name for r in alive))
            for running in alive:
                assert running.process is not None
                with contextlib.suppress(ProcessLookupError):
                    running.process.terminate()
            deadline = time.monotonic() + self.stop_timeout
            for running in alive:
                assert running.process is not None
                try:
                    running.process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.say(f"{running.program.name} still running after SIGTERM; killing it")
                    self._kill(running.process)
                # a prefork worker's pool children its end left behind
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(running.process.pid, signal.SIGKILL)

    def run(self, *, interval: float = 0.5, on_started: Callable[[], None] | None = None) -> None:
        """Starts everything, supervises until `stopping` is set, then stops everything."""
        try:
            self.start()
            if on_started is not None and self.started.is_set():
                on_started()
            while not self.stopping.wait(interval):
                self.poll()
        finally:
            self.stop()


# The embedded stack -------------------------------------------------------------------


def redis_answers(path: Path) -> Callable[[], bool]:
    """A readiness probe: the Redis on this Unix socket answers PING."""

    def probe() -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(1.0)
                sock.connect(str(path))
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    return probe


def torch_threads_for_gpu_worker() -> str | None:
    """OMP_NUM_THREADS for the gpu worker: one without a GPU, where it trains on the cores
    the web server and the cpu worker use too, as torch's default of one thread per core
    spins against them (the demo's first training took 13x the CPU time with two threads
    on 2 busy cores; see benchmarks/RESULTS.md). An OMP_NUM_THREADS of your own wins."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            listed = subprocess.run(
                [smi, "-L"], capture_output=True, text=True, timeout=20, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            listed = ""
        if any(line.startswith("GPU") for line in listed.splitlines()):
            return None
    return "1"


def embedded_stack(
    *,
    var_dir: Path,
    log_dir: Path,
    port: int,
    embedded_redis_socket: Path | None,
    worker_concurrency: int,
    python: str = sys.executable,
) -> list[Program]:
    """The programs of `bin/earmark up`, in start order: the private Redis (when the
    broker is the embedded one, `embedded_redis_socket`), the cpu and gpu workers, beat and
    the web server."""
    logs = log_dir
    programs: list[Program] = []
    if embedded_redis_socket is not None:
        if len(str(embedded_redis_socket).encode()) > UNIX_SOCKET_PATH_MAX:
            raise ValueError(
                f"the embedded Redis socket {embedded_redis_socket} is longer than "
                f"{UNIX_SOCKET_PATH_MAX} bytes, the limit of a Unix socket path: set "
                "EARMARK_VAR_DIR to a shorter folder, or CELERY_BROKER_URL to a Redis of yours"
            )
        redis_server = shutil.which("redis-server")
        if redis_server is None:
            raise ValueError(
                "redis-server is not on PATH: install it (apt-get install redis-server; "
                "bin/earmark up does), or set CELERY_BROKER_URL to a Redis of yours"
            )
        data = embedded_redis_socket.parent
        data.mkdir(parents=True, exist_ok=True)
        options = {
            "port": "0",  # no TCP: only this user's processes reach the socket
            "unixsocket": str(embedded_redis_socket),
            "unixsocketperm": "700",
            "dir": str(data),
            # queued messages survive a restart of Redis (the jobs-redispatch sweep would
            # send them again, but only after JOB_REDISPATCH_LOST_SECONDS)
            "appendonly": "yes",
            "save": "",
            "daemonize": "no",
            "logfile": "",  # stdout, which is redis.log
        }
        programs.append(
            Program(
                name="redis",
                argv=[redis_server, *(arg for o, v in options.items() for arg in (f"--{o}", v))],
                log=logs / "redis.log",
                ready=redis_answers(embedded_redis_socket),
            )
        )
    celery = [python, "-m", "celery", "-A", "earmark"]
    programs.append(
        Program(
            name="worker-cpu",
            argv=[
                *celery,
                *shlex.split(f"worker -Q default,media,text -c {worker_concurrency} -n cpu@%h"),
                *shlex.split("--loglevel INFO"),
            ],
            log=logs / "worker-cpu.log",
        )
    )
    threads = torch_threads_for_gpu_worker()
    programs.append(
        Program(
            name="worker-gpu",
            # one job per GPU, and no fork after torch has run: the gpu queue uses a solo pool
            argv=[*celery, *shlex.split("worker -Q gpu -P solo -n gpu@%h --loglevel INFO")],
            log=logs / "worker-gpu.log",
            env={"OMP_NUM_THREADS": threads} if threads else {},
        )
    )
    programs.append(
        Program(
            name="beat",
            argv=[
                *celery,
                "beat",
                "-s",
                str(var_dir / "celerybeat-schedule"),
                "--loglevel",
                "INFO",
            ],
            log=logs / "beat.log",
        )
    )
    programs.append(
        Program(
            name="web",
            argv=[python, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"],
            log=logs / "web.log",
        )
    )
    return programs
