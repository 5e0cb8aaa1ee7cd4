"""Load test of the annotation API: simulated workers loop claim → submit against gunicorn
and PostgreSQL.

Usage:
  .venv/bin/python benchmarks/load_claim_submit.py [--clips 50000] [--levels 1,10,50,100]
      [--duration 30] [--gunicorn-workers 4] [--database earmark_load]
      [--server postgres://postgres@127.0.0.1:5432] [--keep-database]
      [--broker filesystem://] [--offered LOOPS_PER_S] [--set NAME=VALUE …] [--passes N]
      [--compare-label-studio --label-studio-venv PATH [--label-studio-database ls_bench]]

It (re)creates a private PostgreSQL database (`--database`, dropped at the end unless
--keep-database), migrates it, seeds `--clips` fetched clips in one published batch
(AudioCaps validation style: 5 captions per clip, 1 clip per HIT) and one annotator with an
API token per simulated worker, starts gunicorn on 127.0.0.1 with the production settings
(DEBUG off), then for each concurrency level runs that many asyncio workers (aiohttp), each
looping POST /api/work/claim → GET each clip's audio → POST /api/work/assignments/{id}/submit
for `--duration`
seconds (a loop in flight at the deadline finishes): with no think time by default, or,
with `--offered R`, each starting a loop every workers/R seconds, so that together they
offer R loops/s as people who listen and type between submits would.

Prints per level: loops/s, latency percentiles of the whole loop and of each request,
errors, and the CPU time per loop of gunicorn (master and workers), of the whole PostgreSQL
server (backends that exit mid-level counted through the postmaster's reaped-children
times) and of the load generator (on a shared machine the load average says little; CPU per
loop says what a quiet one could do: cores x 1000 / total ms); then checks the database:
no worker on a clip twice, no HIT over-filled (assignments holding a slot ≤ max, and
`taken` equal to them), no caption of a worker on a clip twice, and one submitted
assignment per loop counted. Its last line, for scripts, sums every level:
`loop: server_cpu_ms P loops_per_s L` (gunicorn's CPU per completed loop, the audio GET
included, and loops per second).

Side by side with Label Studio (`--compare-label-studio --label-studio-venv PATH`, PATH a
venv made with `python3 -m venv PATH && PATH/bin/pip install label-studio==1.23.2 gunicorn`,
never the project's own): Label Studio is migrated into its own database on the same server
(`--label-studio-database`, default ls_bench, dropped at the end), given one project with a
task per clip (the same WAV, served by its authenticated upload view, a caption textarea,
overlap 1) and one annotator with an API token per simulated worker, and started under
gunicorn with as many sync workers, DEBUG off, on a free port of 127.0.0.1
(benchmarks/_label_studio.py). Every level then runs against Label Studio and then against
Earmark with the same client, `--passes` times (defaults here: levels 1,10,50, 60 s a
level, 2 passes); a Label Studio loop is GET /api/projects/{id}/next → GET the task's audio
→ POST /api/tasks/{id}/annotations/. The ratio table (c | Label Studio loops/s | Earmark
loops/s | Earmark / LS | server CPU per loop, p95, errors; one cell a pass) follows the
tables, and both databases are checked for duplicates. Both servers are stopped and the
databases dropped on exit, Ctrl-C or SIGTERM.

With no think time, Little's law ties the numbers: loop latency ≈ workers / (loops/s), so
100 such workers at 150 loops/s wait ≈ 670 ms a loop whatever the server does; a latency
target at a given rate is measured with `--offered`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _deployment import (
    CAPTIONS,
    VIOLATIONS,
    LoopFailed,
    LoopFn,
    NoWork,
    children,
    cpu_model,
    django_migrate,
    drop_database,
    integrity_checks,
    load_wav,
    parse_sets,
    percentile,
    postgres_version,
    recreate_database,
    seed,
    server_environment,
    start_gunicorn,
)


@dataclass
class Level:
    workers: int
    loops: int = 0
    no_work: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    loop_ms: list[float] = field(default_factory=list)
    claim_ms: list[float] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    client_cpu: float = 0.0
    server_cpu: float = 0.0  # gunicorn, master and workers
    database_cpu: float = 0.0  # the PostgreSQL server, all its processes
    load_before: float = 0.0
    load_after: float = 0.0


# CPU accounting ---------------------------------------------------------------------------

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def _tree_cpu(parent: int) -> float:
    """User + system CPU seconds so far of `parent`, of its live children, and of the
    children it has already reaped (cutime, cstime): a child that exits between two readings
    (Django reopens its PostgreSQL connection every CONN_MAX_AGE seconds, so backends come
    and go) keeps its share, moved from the live sum into the parent's counters."""
    own = _stat(parent)
    if own is None:
        return 0.0
    ticks = sum(int(own[i]) for i in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    for child in children(parent):
        fields = _stat(child)
        if fields is not None:
            ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / TICKS


class Meter:
    """CPU used by gunicorn (master and workers) and by the PostgreSQL server (postmaster,
    backends and its background writers) between two readings; the machine is shared, so
    the load average alone cannot say what this benchmark costs."""

    def __init__(self, server: subprocess.Popen[bytes], dsn: str) -> None:
        import psycopg

        self.server = server
        # the backend's parent read while the backend lives (it exits with the connection)
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            (backend,) = row
            fields = _stat(backend)
        if fields is None:
            raise SystemExit("PostgreSQL must run on this machine to meter its CPU.")
        self.postmaster = int(fields[1])  # the backend's parent

    def read(self) -> tuple[float, float]:
        return _tree_cpu(self.server.pid), _tree_cpu(self.postmaster)


# Load -------------------------------------------------------------------------------------


def earmark_loop(tokens: list[str]) -> LoopFn:
    """Earmark's annotator loop: POST /api/work/claim → GET each clip's audio → POST the
    captions to /api/work/assignments/{id}/submit, as worker `number` (tokens[number])."""

    async def loop(session: Any, number: int) -> float:
        headers = {"Authorization": f"Bearer {tokens[number]}"}
        async with session.post("/api/work/claim", headers=headers) as claim:
            body = await claim.read()
        claimed = time.perf_counter()
        if claim.status == 204:
            raise NoWork
        if claim.status not in (200, 201):
            raise LoopFailed(f"claim {claim.status}")
        work = json.loads(body)
        # the worker plays each clip (the server records it; submit checks it)
        played = []
        for clip in work["clips"]:
            url = f"/api/work/assignments/{work['id']}/clips/{clip['id']}/audio"
            async with session.get(url, headers=headers) as audio:
                await audio.read()
            played.append(audio.status)
        if any(status != 200 for status in played):
            raise LoopFailed(f"audio {max(played)}")
        caption = CAPTIONS[number % len(CAPTIONS)]
        captions = {str(clip["id"]): caption for clip in work["clips"]}
        async with session.post(
            f"/api/work/assignments/{work['id']}/submit",
            headers={**headers, "Content-Type": "application/json"},
            data=json.dumps({"captions": captions}),
        ) as submit:
            await submit.read()
        if submit.status != 200:
            raise LoopFailed(f"submit {submit.status}")
        return claimed

    return loop


async def _worker(
    session: Any, loop: LoopFn, level: Level, deadline: float, number: int, interval: float
) -> None:
    """Runs `loop` until the deadline. With `interval` > 0 the worker starts a loop every
    `interval` seconds (a random phase first), like a person who spends the rest of the
    time listening and typing; a loop that overruns starts the next at once."""
    import aiohttp

    next_start = time.perf_counter() + (random.uniform(0, interval) if interval else 0.0)
    # with no think time the next loop starts now, and none starts after the deadline
    while (next_start if interval else time.perf_counter()) < deadline:
        if interval:
            await asyncio.sleep(max(0.0, next_start - time.perf_counter()))
            next_start += interval
        start = time.perf_counter()
        try:
            claimed = await loop(session, number)
        except NoWork:
            level.no_work += 1
            await asyncio.sleep(0.05)
            continue
        except LoopFailed as failed:
            level.errors[str(failed)] += 1
            continue
        except (aiohttp.ClientError, TimeoutError) as exc:
            level.errors[type(exc).__name__] += 1
            continue
        done = time.perf_counter()
        level.loops += 1
        level.loop_ms.append(1000 * (done - start))
        level.claim_ms.append(1000 * (claimed - start))
        level.submit_ms.append(1000 * (done - claimed))


async def _run_level(
    base_url: str,
    loop: LoopFn,
    workers: int,
    duration: float,
    meter: Meter,
    offered: float = 0.0,
) -> Level:
    """One level: `workers` simulated workers for `duration` seconds, with no think time,
    or together offering `offered` loops/s (each starting one every workers/offered s)."""
    import aiohttp

    level = Level(workers=workers)
    interval = workers / offered if offered else 0.0
    # one connection per worker at most: gunicorn's sync workers close each connection
    # after its response, gthread workers keep it alive
    connector = aiohttp.TCPConnector(limit=workers)
    timeout = aiohttp.ClientTimeout(total=60.0)
    async with aiohttp.ClientSession(base_url, connector=connector, timeout=timeout) as session:
        level.load_before = os.getloadavg()[0]
        server_cpu, db_cpu = meter.read()
        cpu = time.process_time()
        start = time.perf_counter()
        deadline = start + duration
        await asyncio.gather(
            *(_worker(session, loop, level, deadline, i, interval) for i in range(workers))
        )
        level.elapsed = time.perf_counter() - start
        level.client_cpu = time.process_time() - cpu
        server_after, db_after = meter.read()
        level.server_cpu = server_after - server_cpu
        level.database_cpu = db_after - db_cpu
        level.load_after = os.getloadavg()[0]
    return level


# Report -----------------------------------------------------------------------------------


def _row(level: Level) -> str:
    rate = level.loops / level.elapsed if level.elapsed else 0.0
    errors = sum(level.errors.values())
    cells = [
        f"{level.workers}",
        f"{level.loops}",
        f"{rate:.1f}",
        *(f"{percentile(level.loop_ms, q):.0f}" for q in (50, 95, 99)),
        *(f"{percentile(level.claim_ms, q):.0f}" for q in (50, 95)),
        *(f"{percentile(level.submit_ms, q):.0f}" for q in (50, 95)),
        f"{errors}"
        + (f" ({', '.join(f'{k}: {n}' for k, n in level.errors.items())})" if errors else ""),
        f"{level.no_work}",
        *(
            f"{1000 * cpu / level.loops:.1f}" if level.loops else "-"
            for cpu in (level.server_cpu, level.database_cpu, level.client_cpu)
        ),
        f"{level.load_before:.1f} → {level.load_after:.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| workers | loops | loops/s | loop p50 ms | loop p95 | loop p99 | claim p50 | claim p95 "
    "| submit p50 | submit p95 | errors | no work (204) | CPU ms/loop: gunicorn | PostgreSQL "
    "| load generator | load avg |\n"
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"
)


def ratio_table(runs: dict[int, list[tuple[Level, Level]]]) -> str:
    """The side-by-side table: per concurrency c, each pass's (Label Studio, Earmark) levels,
    cells "pass 1 / pass 2 / …"."""

    def rate(level: Level) -> float:
        return level.loops / level.elapsed if level.elapsed else 0.0

    def ratio(ls: Level, earmark: Level) -> str:
        return f"{rate(earmark) / rate(ls):.1f}\N{MULTIPLICATION SIGN}" if rate(ls) else "-"

    def cpu(level: Level) -> str:
        return f"{1000 * level.server_cpu / level.loops:.1f}" if level.loops else "-"

    def p95(level: Level) -> str:
        return f"{percentile(level.loop_ms, 95):.0f}" if level.loop_ms else "-"

    def errors(ls: Level, earmark: Level) -> str:
        return f"{sum(ls.errors.values())}, {sum(earmark.errors.values())}"

    lines = [
        "| c | Label Studio loops/s | Earmark loops/s | Earmark / LS "
        "| Earmark server CPU per loop ms | Label Studio server CPU per loop ms "
        "| loop p95 ms: Label Studio | Earmark | errors: LS, Earmark |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for workers, pairs in runs.items():
        cells = [
            " / ".join(f"{rate(ls):.2f}" for ls, _ in pairs),
            " / ".join(f"{rate(earmark):.2f}" for _, earmark in pairs),
            " / ".join(ratio(ls, earmark) for ls, earmark in pairs),
            " / ".join(cpu(earmark) for _, earmark in pairs),
            " / ".join(cpu(ls) for ls, _ in pairs),
            " / ".join(p95(ls) for ls, _ in pairs),
            " / ".join(p95(earmark) for _, earmark in pairs),
            " / ".join(errors(ls, earmark) for ls, earmark in pairs),
        ]
        lines.append(f"| {workers} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; with --compare-label-studio the defaults become the issue's
    side-by-side run: levels 1,10,50, 60 s a level, two passes."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=50_000)
    parser.add_argument("--captions-per-clip", type=int, default=5)
    parser.add_argument(
        "--levels", default=None, help="worker counts (default 1,10,50,100; compare: 1,10,50)"
    )
    parser.add_argument(
        "--duration",
        "--seconds",
        dest="duration",
        type=float,
        default=None,
        help="seconds per level (default 30; compare: 60)",
    )
    parser.add_argument(
        "--passes", type=int, default=None, help="runs of every level (default 1; compare: 2)"
    )
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds, not reported")
    parser.add_argument(
        "--offered",
        type=float,
        default=0.0,
        metavar="LOOPS_PER_S",
        help="the loops/s each level's workers offer together, spread evenly over them "
        "(think time); 0 (default): none, each worker loops as fast as it is answered",
    )
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    parser.add_argument("--worker-class", default="sync")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="earmark_load")
    parser.add_argument("--keep-database", action="store_true")
    parser.add_argument("--broker", default=os.environ.get("CELERY_BROKER_URL", "filesystem://"))
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extra setting for the server's environment (repeatable)",
    )
    parser.add_argument(
        "--compare-label-studio",
        action="store_true",
        help="also run Label Studio (from --label-studio-venv) on the same PostgreSQL with "
        "as many tasks and annotators, the same client against both, level by level",
    )
    parser.add_argument(
        "--label-studio-venv",
        type=Path,
        default=None,
        metavar="PATH",
        help="a venv holding label-studio==1.23.2 and gunicorn (see benchmarks/README.md)",
    )
    parser.add_argument("--label-studio-database", default="ls_bench")
    args = parser.parse_args(argv)
    compare = args.compare_label_studio
    if compare and args.label_studio_venv is None:
        parser.error("--compare-label-studio needs --label-studio-venv PATH")
    if args.label_studio_venv is not None and not compare:
        parser.error("--label-studio-venv is only read with --compare-label-studio")
    if compare and args.offered:
        parser.error("--offered is not supported with --compare-label-studio")
    if args.label_studio_database == args.database:
        parser.error("--label-studio-database must differ from --database")
    args.levels = args.levels or ("1,10,50" if compare else "1,10,50,100")
    try:
        args.levels = [int(n) for n in args.levels.split(",")]
    except ValueError:
        parser.error(f"--levels {args.levels!r}: worker counts separated by commas, e.g. 1,10,50")
    if any(n < 1 for n in args.levels):
        parser.error(f"--levels {args.levels}: each level needs at least one worker")
    args.duration = args.duration or (60.0 if compare else 30.0)
    args.passes = args.passes or (2 if compare else 1)
    try:
        args.extra = parse_sets(args.set)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def _stop(server: subprocess.Popen[bytes] | None) -> None:
    if server is not None and server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM ends the run as Ctrl-C does: servers stopped, databases dropped."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    levels: list[int] = args.levels
    signal.signal(signal.SIGTERM, _terminate)
    var = tempfile.mkdtemp(prefix="earmark-load-")
    # the filesystem broker by default: no Celery worker runs; jobs queued by a submit
    # (active learning's caption checks) are only written
    env = server_environment(
        database_url=f"{args.server}/{args.database}", var=var, broker=args.broker, extra=args.extra
    )
    server: subprocess.Popen[bytes] | None = None
    ls_server: subprocess.Popen[bytes] | None = None
    ls_dsn = f"{args.server}/{args.label_studio_database}"
    try:
        started = time.perf_counter()
        recreate_database(args.server, args.database)
        django_migrate(env)
        migrated = time.perf_counter()
        batch_id, tokens = seed(
            clips=args.clips, workers=max(levels), captions_per_clip=args.captions_per_clip
        )
        seeded = time.perf_counter()
        print(
            f"database {args.database}: migrated in {migrated - started:.1f} s, "
            f"{args.clips:,} clips and {max(levels)} workers seeded in {seeded - migrated:.1f} s",
            flush=True,
        )
        from django.db import connection

        pg_version = postgres_version()
        connection.close()

        ls_loop: LoopFn | None = None
        ls_meter: Meter | None = None
        ls_base = ""
        if args.compare_label_studio:
            import _label_studio

            recreate_database(args.server, args.label_studio_database)
            ls_env = _label_studio.environment(
                server=args.server, database=args.label_studio_database, data_dir=Path(var) / "ls"
            )
            project, ls_tokens = _label_studio.setup(
                venv=args.label_studio_venv,
                env=ls_env,
                tasks=args.clips,
                annotators=max(levels),
                wav=load_wav(),
                scratch=Path(var),
            )
            print(
                f"Label Studio database {args.label_studio_database}: migrated and seeded "
                f"({args.clips:,} tasks, {max(levels)} annotators) in "
                f"{time.perf_counter() - seeded:.1f} s",
                flush=True,
            )
            ls_port = _label_studio.free_port()
            ls_server = _label_studio.start(
                venv=args.label_studio_venv,
                env=ls_env,
                port=ls_port,
                workers=args.gunicorn_workers,
                log=Path(var) / "label-studio.log",
            )
            ls_meter = Meter(ls_server, ls_dsn)
            ls_loop = _label_studio.loop(ls_tokens, project)
            ls_base = f"http://127.0.0.1:{ls_port}"

        server = start_gunicorn(
            port=args.port,
            workers=args.gunicorn_workers,
            env=env,
            worker_class=args.worker_class,
            threads=args.threads,
        )
        meter = Meter(server, env["DATABASE_URL"])
        base_url = f"http://127.0.0.1:{args.port}"
        loop = earmark_loop(tokens)
        results: list[Level] = []
        ls_results: list[Level] = []
        runs: dict[int, list[tuple[Level, Level]]] = {n: [] for n in levels}
        warm_loops = ls_warm_loops = 0
        if args.warmup > 0:
            few = min(10, max(levels))
            if ls_loop is not None and ls_meter is not None:
                ls_warm_loops = asyncio.run(
                    _run_level(ls_base, ls_loop, few, args.warmup, ls_meter)
                ).loops
            warm_loops = asyncio.run(_run_level(base_url, loop, few, args.warmup, meter)).loops
        for number in range(1, args.passes + 1):
            for workers in levels:
                ls_level = None
                if ls_loop is not None and ls_meter is not None:
                    ls_level = asyncio.run(
                        _run_level(ls_base, ls_loop, workers, args.duration, ls_meter)
                    )
                    ls_results.append(ls_level)
                    print(f"pass {number} Label Studio {_row(ls_level)}", flush=True)
                level = asyncio.run(
                    _run_level(base_url, loop, workers, args.duration, meter, args.offered)
                )
                results.append(level)
                print(f"pass {number} Earmark {_row(level)}", flush=True)
                if ls_level is not None:
                    runs[workers].append((ls_level, level))
        _stop(server)
        server = None
        _stop(ls_server)
        ls_server = None

        checks = integrity_checks(batch_id, args.captions_per_clip)
        connection.close()
        ls_checks = _ls_integrity(ls_dsn) if args.compare_label_studio else {}
    finally:
        _stop(server)
        _stop(ls_server)
        if args.compare_label_studio:
            drop_database(args.server, args.label_studio_database)
        if not args.keep_database:  # (FORCE): this process's own connection goes too
            drop_database(args.server, args.database)
        shutil.rmtree(var, ignore_errors=True)  # the broker's files, Label Studio's media

    print()
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs ({cpu_model()}), "
        f"Python {platform.python_version()}, PostgreSQL {pg_version}; gunicorn "
        f"{args.gunicorn_workers} {args.worker_class} workers (threads {args.threads}); "
        f"{args.clips:,} clips, {args.captions_per_clip} captions each, 1 clip per HIT; "
        f"{args.duration:.0f} s per level, {args.passes} pass(es), "
        + (f"{args.offered:g} loops/s offered" if args.offered else "no think time")
        + f"; broker {args.broker.split('://')[0]}"
        + (f"; {', '.join(args.set)}" if args.set else "")
        + "."
    )
    print()
    print("Earmark:" if ls_results else "", HEADER, sep="\n" if ls_results else "")
    for level in results:
        print(_row(level))
    if ls_results:
        print()
        print(
            f"Label Studio (gunicorn {args.gunicorn_workers} sync workers, the same client; "
            "claim = next task, submit = audio + annotation):"
        )
        print(HEADER)
        for level in ls_results:
            print(_row(level))
        print()
        print(ratio_table(runs))
    print()
    for name, value in checks.items():
        print(f"- {name}: {value:,}")
    counted = warm_loops + sum(level.loops for level in results)
    bad = sum(checks[k] for k in VIOLATIONS) + checks["assignments left accepted"]
    print(f"- loops the clients saw succeed (warm-up included): {counted:,}")
    if counted != checks["submitted assignments"]:
        print("  (differs from the submitted assignments: a submit answered with an error)")
    for name, value in ls_checks.items():
        print(f"- Label Studio: {name}: {value:,}")
    if ls_checks:
        ls_counted = ls_warm_loops + sum(level.loops for level in ls_results)
        print(f"- Label Studio: loops the clients saw succeed (warm-up included): {ls_counted:,}")
    ls_bad = sum(v for k, v in ls_checks.items() if k != "annotations")
    if bad or ls_bad:
        raise SystemExit("integrity check FAILED: see the counts above")
    print(
        "integrity: OK (no duplicates, no over-filled HIT, taken consistent"
        + ("; Label Studio: no task annotated twice" if ls_checks else "")
        + ")"
    )
    print(loop_line(results))


def _ls_integrity(dsn: str) -> dict[str, int]:
    import _label_studio

    return _label_studio.integrity(dsn)


def loop_line(levels: list[Level]) -> str:
    """The run in one line, last, for scripts: gunicorn's CPU (master and workers, the
    audio GETs included) per completed loop, and loops per second, over every level."""
    loops = sum(level.loops for level in levels)
    elapsed = sum(level.elapsed for level in levels)
    cpu = sum(level.server_cpu for level in levels)
    server_ms = 1000 * cpu / loops if loops else float("nan")
    rate = loops / elapsed if elapsed else 0.0
    return f"loop: server_cpu_ms {server_ms:.1f} loops_per_s {rate:.1f}"


if __name__ == "__main__":
    main()
