"""Where the server's CPU goes in a worker's loop (claim → GET the clip's audio → submit):
the deployment of load_claim_submit.py, with gunicorn run under py-spy.

Usage:
  .venv/bin/python benchmarks/profile_loop.py --py-spy /path/to/py-spy [--clips 5000]
      [--workers 1] [--duration 30] [--database earmark_profile] [--set NAME=VALUE …]

py-spy (`pip install py-spy`, in any environment: it is a standalone binary) samples
every gunicorn process (--subprocesses) while `--workers` simulated workers loop with no
think time; only samples of running threads are kept (py-spy's default skips idle ones),
so a sample is a slice of CPU time. Each sample is put in one request (the view on its
stack: claim, audio, submit; outside any view: before routing or after the response)
and one category (the first matching rule of CATEGORIES, read from the innermost frame
outwards); a category's share of the samples times the server CPU per loop, metered as
load_claim_submit.py meters it, gives its milliseconds per loop. py-spy pauses each
process to sample it, which costs the processes a little time; the shares, not the
absolute figures, are what the profile says.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from _deployment import (
    django_migrate,
    drop_database,
    parse_sets,
    recreate_database,
    seed,
    server_environment,
    start_gunicorn,
)
from load_claim_submit import Level, Meter, _run_level, earmark_loop

# (category, substrings of a frame "function (file:line)"), first match from the innermost
# frame outwards wins; the order puts the specific (a query inside the cache code) first
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("queries (psycopg, PostgreSQL round trips)", ("psycopg/",)),
    ("cache calls (redis client)", ("redis/", "django/core/cache/")),
    ("query building (ORM compiler, models)", ("django/db/models/", "django/db/backends/")),
    ("ClipAudioServed write", ("clip_audio_served", "record_audio_served", "audio_served")),
    ("file serving (storage, response body)", ("core/media.py", "files/storage", "sendfile")),
    ("throttles", ("throttling.py", "ninja/throttling")),
    ("authentication (token lookup)", ("TokenAuth", "api_token_authenticate", "ninja/security")),
    ("serialization (schemas, JSON)", ("pydantic", "ninja/schema", "ninja/responses", "json/")),
    ("ninja routing and parsing", ("ninja/",)),
    ("URL resolution", ("django/urls/",)),
    ("middleware: sessions", ("sessions/",)),
    ("middleware: auth", ("contrib/auth/",)),
    ("middleware: axes", ("axes/",)),
    ("middleware: CSP", ("csp/",)),
    ("middleware: whitenoise", ("whitenoise/",)),
    ("middleware: security, common, csrf, clickjacking, messages", ("django/middleware/",)),
    ("middleware: messages", ("contrib/messages/",)),
    ("gunicorn (HTTP parsing, sockets)", ("gunicorn/",)),
    ("Django request/response machinery", ("django/core/handlers/", "django/http/")),
)
REQUESTS = {"work_claim": "claim", "work_clip_audio": "audio", "work_submit": "submit"}


def classify(stack: str) -> tuple[str, str]:
    frames = stack.split(";")  # outermost first
    request = "outside a view"
    for frame in frames:
        name = frame.split(" (", 1)[0]
        if name in REQUESTS:
            request = REQUESTS[name]
            break
    for frame in reversed(frames):
        for category, needles in CATEGORIES:
            if any(needle in frame for needle in needles):
                return request, category
    return request, "other (view and service code)"


def report(raw: Path, cpu_ms_per_loop: float) -> None:
    by_category: Counter[str] = Counter()
    by_request: Counter[str] = Counter()
    cells: Counter[tuple[str, str]] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or ("gunicorn" not in stack and "django" not in stack):
            continue  # py-spy's view of a process that is not gunicorn's
        n = int(count)
        request, category = classify(stack)
        by_category[category] += n
        by_request[request] += n
        cells[request, category] += n
    total = sum(by_category.values())
    if not total:
        raise SystemExit("py-spy recorded no samples of gunicorn")
    ms = cpu_ms_per_loop / total
    columns = ["claim", "audio", "submit", "outside a view"]
    print(f"\n{total:,} samples; server CPU {cpu_ms_per_loop:.1f} ms per loop\n")
    print("| category | ms/loop | share | " + " | ".join(columns) + " |")
    print("|---|---:|---:|" + "---:|" * len(columns))
    for category, n in by_category.most_common():
        row = [f"{ms * cells[c, category]:.2f}" for c in columns]
        print(f"| {category} | {ms * n:.2f} | {100 * n / total:.0f} % | " + " | ".join(row) + " |")
    row = [f"{ms * by_request[c]:.2f}" for c in columns]
    print(f"| **all** | {cpu_ms_per_loop:.2f} | 100 % | " + " | ".join(row) + " |")


def _loop_level(
    base_url: str, tokens: list[str], workers: int, duration: float, meter: Meter
) -> Level:
    """`workers` simulated workers running load_claim_submit.py's Earmark loop for
    `duration` seconds, metered as that script meters it."""
    return asyncio.run(_run_level(base_url, earmark_loop(tokens), workers, duration, meter))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--py-spy", required=True, help="path of the py-spy binary")
    parser.add_argument("--clips", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=1, help="simulated workers")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    parser.add_argument("--rate", type=int, default=50, help="py-spy samples per second")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="earmark_profile")
    parser.add_argument("--broker", default=os.environ.get("CELERY_BROKER_URL", "filesystem://"))
    parser.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()

    var = tempfile.mkdtemp(prefix="earmark-profile-")
    env = server_environment(
        database_url=f"{args.server}/{args.database}",
        var=var,
        broker=args.broker,
        extra=parse_sets(args.set),
    )
    recreate_database(args.server, args.database)
    django_migrate(env)
    _, tokens = seed(clips=args.clips, workers=args.workers, captions_per_clip=5)
    from django.db import connection

    connection.close()
    raw = args.raw or Path(var) / "py-spy.txt"
    server = start_gunicorn(port=args.port, workers=args.gunicorn_workers, env=env)
    meter = Meter(server, env["DATABASE_URL"])
    base_url = f"http://127.0.0.1:{args.port}"
    try:
        # every process warmed (URL patterns compiled, connections open) before sampling
        _loop_level(base_url, tokens, args.workers, 5.0, meter)
        spy = subprocess.Popen(
            [args.py_spy, "record", "--pid", str(server.pid), "--subprocesses", "--nonblocking",
             "--rate", str(args.rate), "--format", "raw", "--output", str(raw)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(2)  # py-spy attaches to every process
        level = _loop_level(base_url, tokens, args.workers, args.duration, meter)
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
        drop_database(args.server, args.database)
    print(
        f"{level.workers} workers, {level.loops} loops in {level.elapsed:.1f} s, "
        f"errors {dict(level.errors) or 0}"
    )
    report(raw, 1000 * level.server_cpu / level.loops)
    if not args.raw:
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
