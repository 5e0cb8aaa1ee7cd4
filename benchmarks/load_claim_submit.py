"""Load test of the annotation API: simulated workers loop claim → submit against gunicorn
and PostgreSQL.

Usage:
  .venv/bin/python benchmarks/load_claim_submit.py [--clips 50000] [--levels 1,10,50,100]
      [--duration 30] [--gunicorn-workers 4] [--database earmark_load]
      [--server postgres://postgres@127.0.0.1:5432] [--keep-database]
      [--broker filesystem://] [--offered LOOPS_PER_S] [--set NAME=VALUE …]

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
    children,
    cpu_model,
    django_migrate,
    drop_database,
    integrity_checks,
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


async def _worker(
    session: Any, token: str, level: Level, deadline: float, number: int, interval: float
) -> None:
    """Loops claim → submit until the deadline. With `interval` > 0 the worker starts a
    loop every `interval` seconds (a random phase first), like a person who spends the
    rest of the time listening and typing; a loop that overruns starts the next at once."""
    import aiohttp

    headers = {"Authorization": f"Bearer {token}"}
    caption = CAPTIONS[number % len(CAPTIONS)]
    next_start = time.perf_counter() + (random.uniform(0, interval) if interval else 0.0)
    while next_start < deadline:
        if interval:
            await asyncio.sleep(max(0.0, next_start - time.perf_counter()))
            next_start += interval
        start = time.perf_counter()
        if not interval:
            next_start = start
        try:
            async with session.post("/api/work/claim", headers=headers) as claim:
                body = await claim.read()
            claimed = time.perf_counter()
            if claim.status == 204:
                level.no_work += 1
                await asyncio.sleep(0.05)
                continue
            if claim.status not in (200, 201):
                level.errors[f"claim {claim.status}"] += 1
                continue
            work = json.loads(body)
            # the worker plays each clip (the server records it; submit checks it)
            played = []
            for clip in work["clips"]:
                url = f"/api/work/assignments/{work['id']}/clips/{clip['id']}/audio"
                async with session.get(url, headers=headers) as audio:
                    await audio.read()
                played.append(audio.status)
            if any(status != 200 for status in played):
                level.errors[f"audio {max(played)}"] += 1
                continue
            captions = {str(clip["id"]): caption for clip in work["clips"]}
            async with session.post(
                f"/api/work/assignments/{work['id']}/submit",
                headers={**headers, "Content-Type": "application/json"},
                data=json.dumps({"captions": captions}),
            ) as submit:
                await submit.read()
            done = time.perf_counter()
        except (aiohttp.ClientError, TimeoutError) as exc:
            level.errors[type(exc).__name__] += 1
            continue
        if submit.status != 200:
            level.errors[f"submit {submit.status}"] += 1
            continue
        level.loops += 1
        level.loop_ms.append(1000 * (done - start))
        level.claim_ms.append(1000 * (claimed - start))
        level.submit_ms.append(1000 * (done - claimed))


async def _run_level(
    base_url: str,
    tokens: list[str],
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
            *(_worker(session, tokens[i], level, deadline, i, interval) for i in range(workers))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=50_000)
    parser.add_argument("--captions-per-clip", type=int, default=5)
    parser.add_argument("--levels", default="1,10,50,100")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per level")
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
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",")]

    var = tempfile.mkdtemp(prefix="earmark-load-")
    try:
        extra = parse_sets(args.set)
    except ValueError as exc:
        parser.error(str(exc))
    # the filesystem broker by default: no Celery worker runs; jobs queued by a submit
    # (active learning's caption checks) are only written
    env = server_environment(
        database_url=f"{args.server}/{args.database}", var=var, broker=args.broker, extra=extra
    )
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

    server = start_gunicorn(
        port=args.port,
        workers=args.gunicorn_workers,
        env=env,
        worker_class=args.worker_class,
        threads=args.threads,
    )
    meter = Meter(server, env["DATABASE_URL"])
    base_url = f"http://127.0.0.1:{args.port}"
    results: list[Level] = []
    warm_loops = 0
    try:
        if args.warmup > 0:
            warm = asyncio.run(
                _run_level(base_url, tokens, min(10, max(levels)), args.warmup, meter)
            )
            warm_loops = warm.loops
        for workers in levels:
            level = asyncio.run(
                _run_level(base_url, tokens, workers, args.duration, meter, args.offered)
            )
            results.append(level)
            print(_row(level), flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)

    checks = integrity_checks(batch_id, args.captions_per_clip)
    connection.close()
    if not args.keep_database:
        drop_database(args.server, args.database)
    shutil.rmtree(var, ignore_errors=True)  # the broker's files of the jobs submits queued

    print()
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs ({cpu_model()}), "
        f"Python {platform.python_version()}, PostgreSQL {pg_version}; gunicorn "
        f"{args.gunicorn_workers} {args.worker_class} workers (threads {args.threads}); "
        f"{args.clips:,} clips, {args.captions_per_clip} captions each, 1 clip per HIT; "
        f"{args.duration:.0f} s per level, "
        + (f"{args.offered:g} loops/s offered" if args.offered else "no think time")
        + f"; broker {args.broker.split('://')[0]}"
        + (f"; {', '.join(args.set)}" if args.set else "")
        + "."
    )
    print()
    print(HEADER)
    for level in results:
        print(_row(level))
    print()
    for name, value in checks.items():
        print(f"- {name}: {value:,}")
    counted = warm_loops + sum(level.loops for level in results)
    bad = sum(checks[k] for k in VIOLATIONS) + checks["assignments left accepted"]
    print(f"- loops the clients saw succeed (warm-up included): {counted:,}")
    if counted != checks["submitted assignments"]:
        print("  (differs from the submitted assignments: a submit answered with an error)")
    if bad:
        raise SystemExit("integrity check FAILED: see the counts above")
    print("integrity: OK (no duplicates, no over-filled HIT, taken consistent)")
    print(loop_line(results))


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
