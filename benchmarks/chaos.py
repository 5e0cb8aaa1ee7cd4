"""Chaos test: the annotation load against a real deployment while its processes and
database connections are killed, then every caption the clients were told was stored
compared with the database (issue 23).

Usage:
  .venv/bin/python benchmarks/chaos.py [--workers 85] [--duration 150] [--offered 40]
      [--fault-every 10] [--gunicorn-kills 2] [--celery-down 5] [--drop-answers 0.05]
      [--settle 300]
      [--stats-every 15] [--clips 20000] [--database earmark_chaos]
      [--server postgres://postgres@127.0.0.1:5432] [--broker redis://127.0.0.1:6379/4]
      [--set NAME=VALUE …] [--keep-database] [--keep-logs]

The script (re)creates a private PostgreSQL database (`--database`, dropped at the end
unless --keep-database), migrates and seeds it as benchmarks/load_claim_submit.py does
(one published batch, one clip per HIT, an API token per simulated worker), and starts
the deployment README's "Running in production" describes, on this machine: gunicorn with
`--gunicorn-workers` sync workers (production settings, DEBUG off), a Celery worker for
the default, media and text queues (and the sweeps queue every worker serves), and beat,
all on the Redis broker `--broker`. Disagreement checks of new captions (batch_flag jobs)
are queued by the flags sweep every ACTIVE_FLAG_SWEEP_SECONDS (10 s here instead of 60 s,
so several run during the load), and the researcher queues a corpus_statistics job every
`--stats-every` seconds, so jobs are running when the faults come.

Then `--workers` simulated crowdworkers (aiohttp) loop claim → fetch the clip's audio →
submit for `--duration` seconds, together offering `--offered` loops/s (0: no think time).
A request that fails (connection reset, 5xx) is sent again, as a careful script would:
after the answer's Retry-After (at most 1 s) or a short pause; a submit is sent again with
the same captions, which the server answers as the first if it stored them. To test that
on purpose, a share `--drop-answers` of the submits lose their answer: the client hangs up
once the request is sent, waits until the server shows the HIT submitted, and sends the
same submit again. Every
`--fault-every` seconds one fault is injected, in this order, round and round:

  gunicorn   kill -9 of `--gunicorn-kills` gunicorn workers (the master starts new ones);
  database   pg_terminate_backend of every connection to the database (web, worker, beat),
             as a database restart or a failover does;
  celery     kill -9 of the Celery worker and its pool processes while a job runs (once
             started, it waits up to 20 s for one), restarted under the same name
             `--celery-down` seconds later (as a supervisor would).

After the load it waits until every job is final and every submitted caption has been
checked, or `--settle` seconds after the last fault (the issue's 5 minutes by default),
then prints: the client's record (loops, retries by cause, submits that needed a retry),
the comparison with the database (target 0 / 0 / 0: captions lost — answered 200 but not
stored as sent; phantom — stored but never sent; duplicated — a worker's caption of a clip
stored twice), the integrity checks of load_claim_submit.py (no HIT over-filled, `taken`
consistent), assignments left open past their deadline, and the jobs not final (target 0)
with every job's kind, state and executions. It exits with status 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, NamedTuple

from _deployment import (
    CAPTIONS,
    RESEARCHER,
    ROOT,
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

FAULTS = ("gunicorn", "database", "celery")
CELERY_NAME = "chaos@%h"
MAX_ATTEMPTS = 30  # per request; then the client gives up on it (counted)
MAX_RETRY_WAIT = 1.0  # seconds: a Retry-After longer than this is shortened
TRANSIENT = (500, 502, 503, 504)


# Client ---------------------------------------------------------------------------------


@dataclass
class Submission:
    """What one worker sent for one assignment, and how the server answered."""

    worker: int
    captions: dict[int, str]
    outcome: str = "unsent"  # "stored" (200), "refused NNN", "gave up"
    attempts: int = 0


@dataclass
class Record:
    """The clients' side of the run."""

    loops: int = 0
    no_work: int = 0
    loop_ms: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)  # request and cause → count
    gave_up: Counter[str] = field(default_factory=Counter)
    submissions: dict[int, Submission] = field(default_factory=dict)
    jobs: list[int] = field(default_factory=list)  # statistics jobs the researcher queued
    # submits a retry found already stored: an earlier attempt stored the captions, its
    # answer was lost, and the server answered the retry with what it stored
    answered_from_store: int = 0
    answers_dropped: int = 0  # submits whose answer the client hung up on (--drop-answers)
    load_average: list[float] = field(default_factory=list)  # sampled during the load


class GaveUp(Exception):
    pass


class Answer(NamedTuple):
    status: int
    body: bytes
    attempts: int
    sent_at: datetime  # when the attempt answered was sent


async def _send(
    session: Any,
    record: Record,
    what: str,
    method: str,
    url: str,
    headers: dict[str, str],
    body: str | None = None,
) -> Answer:
    """The answer to a request sent until it gets one that is not
    a transient failure: a dropped connection or a 5xx is sent again after Retry-After (at
    most MAX_RETRY_WAIT) or a short pause. GaveUp after MAX_ATTEMPTS."""
    import aiohttp

    for attempt in range(1, MAX_ATTEMPTS + 1):
        sent_at = datetime.now(UTC)
        try:
            async with session.request(method, url, headers=headers, data=body) as response:
                data = await response.read()
                if response.status not in TRANSIENT:
                    return Answer(response.status, data, attempt, sent_at)
                record.failures[f"{what}: {response.status}"] += 1
                wait = float(response.headers.get("Retry-After", "0.2"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            record.failures[f"{what}: {type(exc).__name__}"] += 1
            wait = 0.2
        await asyncio.sleep(min(wait, MAX_RETRY_WAIT) * random.uniform(0.5, 1.0))
    record.gave_up[what] += 1
    raise GaveUp(what)


@dataclass(frozen=True)
class Plan:
    """How the simulated workers behave."""

    deadline: float  # perf_counter time after which no loop starts
    interval: float  # seconds between the starts of one worker's loops (0: at once)
    drop_answers: float  # share of submits whose answer is lost (the client hangs up)
    port: int  # gunicorn's, on 127.0.0.1


async def _hang_up_after_sending(port: int, path: str, headers: dict[str, str], body: str) -> None:
    """Sends a POST and closes the connection without reading the answer, as a browser on
    a dropping network does: the server still handles it."""
    data = body.encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n{head}\r\n"
    ).encode() + data
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        await writer.drain()
        writer.close()
        await writer.wait_closed()
    except OSError:
        pass  # nothing reached the server: the retry is then the first submit


async def _until_submitted(
    session: Any, record: Record, assignment_id: int, auth: dict[str, str]
) -> None:
    """Polls the assignment (at most 30 s) until the server shows it no longer open."""
    url = f"/api/work/assignments/{assignment_id}"
    for _ in range(150):
        answer = await _send(session, record, "assignment", "GET", url, auth)
        if answer.status != 200 or json.loads(answer.body)["state"] != "accepted":
            return
        await asyncio.sleep(0.2)


async def _worker(session: Any, token: str, number: int, record: Record, plan: Plan) -> None:
    """Claim → audio → submit until the plan's deadline."""
    deadline, interval = plan.deadline, plan.interval
    auth = {"Authorization": f"Bearer {token}"}
    as_json = {**auth, "Content-Type": "application/json"}
    next_start = time.perf_counter() + (random.uniform(0, interval) if interval else 0.0)
    while next_start < deadline:
        await asyncio.sleep(max(0.0, next_start - time.perf_counter()))
        start = time.perf_counter()
        next_start = max(start, next_start + interval) if interval else start
        try:
            status, body, _, _ = await _send(
                session, record, "claim", "POST", "/api/work/claim", auth
            )
            if status == 204:
                record.no_work += 1
                await asyncio.sleep(0.5)
                continue
            if status not in (200, 201):
                record.failures[f"claim: {status}"] += 1
                continue
            work = json.loads(body)
            for clip in work["clips"]:  # the worker plays each clip (submit checks it)
                url = f"/api/work/assignments/{work['id']}/clips/{clip['id']}/audio"
                status = (await _send(session, record, "audio", "GET", url, auth)).status
                if status != 200:
                    record.failures[f"audio: {status}"] += 1
            # a claim whose answer was lost is answered again with the same assignment:
            # its captions stay those first chosen for it
            submission = record.submissions.setdefault(
                work["id"],
                Submission(
                    worker=number,
                    captions={clip["id"]: random.choice(CAPTIONS) for clip in work["clips"]},
                ),
            )
            payload = json.dumps({"captions": {str(k): v for k, v in submission.captions.items()}})
            url = f"/api/work/assignments/{work['id']}/submit"
            if random.random() < plan.drop_answers:
                # the answer is lost once the server stored the submit: the client hangs
                # up after sending it, waits until the HIT shows submitted, and sends the
                # same submit again below, which must be answered with what was stored
                await _hang_up_after_sending(plan.port, url, as_json, payload)
                record.answers_dropped += 1
                await _until_submitted(session, record, work["id"], auth)
            try:
                answer = await _send(session, record, "submit", "POST", url, as_json, payload)
            except GaveUp:
                submission.outcome = "gave up"
                continue
            submission.attempts += answer.attempts
            submission.outcome = "stored" if answer.status == 200 else f"refused {answer.status}"
            if answer.status != 200:
                continue
            if datetime.fromisoformat(json.loads(answer.body)["submitted_at"]) < answer.sent_at:
                record.answered_from_store += 1
        except GaveUp:
            continue
        record.loops += 1
        record.loop_ms.append(1000 * (time.perf_counter() - start))


async def _researcher(
    session: Any, token: str, every: float, record: Record, deadline: float
) -> None:
    """Queues a corpus_statistics job every `every` seconds (0: never)."""
    if not every:
        return
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    while time.perf_counter() + every < deadline:
        await asyncio.sleep(every)
        try:
            url = "/api/projects/load/statistics"
            status, body, _, _ = await _send(
                session, record, "statistics", "POST", url, headers, "{}"
            )
        except GaveUp:
            continue
        if status == 202:
            record.jobs.append(json.loads(body)["id"])
        else:
            record.failures[f"statistics: {status}"] += 1


# Deployment and faults ----------------------------------------------------------------------


class Deployment:
    """gunicorn, a Celery worker and beat on this machine, and the faults done to them."""

    def __init__(self, args: argparse.Namespace, env: dict[str, str], logs: Path) -> None:
        self.args, self.env, self.logs = args, {**os.environ, **env}, logs
        self.logs.mkdir(parents=True, exist_ok=True)
        self.files: list[IO[bytes]] = []
        self.dsn = env["DATABASE_URL"]
        self.gunicorn = start_gunicorn(
            port=args.port, workers=args.gunicorn_workers, env=env, output=self._log("gunicorn")
        )
        self.celery = self._start_celery()
        self.beat = self._spawn(
            "beat",
            ["beat", "-s", str(logs / "celerybeat-schedule"), "--pidfile", str(logs / "beat.pid")],
        )
        self.faults: list[tuple[float, str, str]] = []  # (t, kind, what was done)

    def _log(self, name: str) -> IO[bytes]:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115  (closed by stop)
        self.files.append(log)
        return log

    def _spawn(self, name: str, celery_args: list[str]) -> subprocess.Popen[bytes]:
        log = self._log(name)
        command = [sys.executable, "-m", "celery", "-A", "earmark", *celery_args, "-l", "WARNING"]
        return subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )

    def _start_celery(self) -> subprocess.Popen[bytes]:
        queues = "default,media,text"
        concurrency = str(self.args.celery_concurrency)
        return self._spawn(
            "celery",
            ["worker", "-Q", queues, "-c", concurrency, "-n", CELERY_NAME, "--without-mingle"],
        )

    def kill_gunicorn_workers(self) -> str:
        workers = children(self.gunicorn.pid)
        victims = random.sample(workers, min(self.args.gunicorn_kills, len(workers)))
        for pid in victims:
            _kill(pid)
        return f"kill -9 gunicorn workers {', '.join(map(str, victims))}"

    def terminate_connections(self) -> str:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        return f"pg_terminate_backend of {len(rows)} connections"

    def kill_celery(self) -> str:
        # The worker is killed while it runs a job, the case that matters: a worker still
        # starting (its pool not forked yet) has none to lose, so this waits for the pool
        # and then up to 20 s for a running job.
        waited = time.perf_counter()
        main = self.celery.pid
        while not (pool := children(main)) and time.perf_counter() - waited < 120:
            time.sleep(0.5)
        started = time.perf_counter()
        while not (running := self._running_jobs()) and time.perf_counter() - started < 20:
            time.sleep(0.1)
        waited = time.perf_counter() - waited
        for pid in [main, *pool]:
            _kill(pid)
        self.celery.wait()
        time.sleep(self.args.celery_down)
        self.celery = self._start_celery()
        return (
            f"kill -9 Celery worker {main} and its pool {', '.join(map(str, pool)) or '-'}"
            + (f" ({waited:.0f} s late)" if waited >= 1 else "")
            + f", {running} jobs running; restarted as {self.celery.pid} after "
            f"{self.args.celery_down:g} s"
        )

    def _running_jobs(self) -> int:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM core_job WHERE state = 'running'").fetchone()
        return int(row[0]) if row else 0

    def inject(self, kind: str, t: float) -> None:
        done = {
            "gunicorn": self.kill_gunicorn_workers,
            "database": self.terminate_connections,
            "celery": self.kill_celery,
        }[kind]()
        self.faults.append((t, kind, done))
        print(f"t={t:6.1f} s  {done}", flush=True)

    def stop(self) -> None:
        for process in (self.gunicorn, self.celery, self.beat):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in (self.gunicorn, self.celery, self.beat):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for log in self.files:
            log.close()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it died already
        os.kill(pid, signal.SIGKILL)


async def _load_average(samples: list[float], deadline: float) -> None:
    """The 1-minute load average every 5 s until the deadline: the machine is shared, and
    what else ran says how to read the latencies."""
    while time.perf_counter() < deadline:
        samples.append(os.getloadavg()[0])
        await asyncio.sleep(5.0)


async def _faults(deployment: Deployment, start: float, args: argparse.Namespace) -> None:
    """One fault every `fault_every` seconds, in FAULTS' order, while the load runs."""
    number = 1
    while number * args.fault_every < args.duration - 1:
        await asyncio.sleep(max(0.0, start + number * args.fault_every - time.perf_counter()))
        kind = FAULTS[(number - 1) % len(FAULTS)]
        # blocking (a restart waits for the worker to die): off the clients' event loop
        await asyncio.to_thread(deployment.inject, kind, time.perf_counter() - start)
        number += 1


async def _run(
    args: argparse.Namespace,
    tokens: list[str],
    researcher_token: str,
    deployment: Deployment,
    record: Record,
) -> float:
    """The load with its faults; returns when it started (perf_counter)."""
    import aiohttp

    interval = args.workers / args.offered if args.offered else 0.0
    connector = aiohttp.TCPConnector(limit=args.workers + 1)
    timeout = aiohttp.ClientTimeout(total=60.0)
    base_url = f"http://127.0.0.1:{args.port}"
    async with aiohttp.ClientSession(base_url, connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        deadline = start + args.duration
        plan = Plan(deadline, interval, args.drop_answers, args.port)
        await asyncio.gather(
            *(_worker(session, tokens[i], i, record, plan) for i in range(args.workers)),
            _researcher(session, researcher_token, args.stats_every, record, deadline),
            _faults(deployment, start, args),
            _load_average(record.load_average, deadline),
        )
    return start


# After the run ------------------------------------------------------------------------------


def _settled() -> tuple[int, int, int]:
    """Jobs not final, submitted captions no disagreement check has looked at, and
    assignments still accepted past their deadline."""
    from django.db import connection
    from django.utils import timezone

    from annotation.models import Assignment, Caption
    from core.models import Job

    connection.close()  # the run may have terminated it
    jobs = Job.objects.exclude(state__in=Job.FINISHED_STATES).count()
    unchecked = Caption.objects.filter(
        flag_check__isnull=True,
        assignment__state__in=[Assignment.State.SUBMITTED, Assignment.State.APPROVED],
    ).count()
    overdue = Assignment.objects.filter(
        state=Assignment.State.ACCEPTED, deadline__lt=timezone.now()
    ).count()
    return jobs, unchecked, overdue


def _wait_settled(last_fault: float, settle: float) -> tuple[float, tuple[int, int, int]]:
    """Polls until nothing is left to settle or `settle` seconds after the last fault;
    returns the seconds after the last fault and what was left."""
    while True:
        left = _settled()
        waited = time.perf_counter() - last_fault
        if not any(left) or waited >= settle:
            return waited, left
        time.sleep(2.0)


def _compare(record: Record) -> dict[str, int]:
    """The clients' submissions against the captions in the database."""
    from annotation.models import Caption

    stored: dict[int, dict[int, list[str]]] = {}
    for assignment_id, clip_id, text in Caption.objects.values_list(
        "assignment_id", "clip_id", "text"
    ):
        stored.setdefault(assignment_id, {}).setdefault(clip_id, []).append(text)
    sent = record.submissions
    lost = phantom = duplicated = unconfirmed_stored = unconfirmed_missing = 0
    for assignment_id, submission in sent.items():
        rows = stored.get(assignment_id, {})
        matching = sum(
            1 for clip_id, text in submission.captions.items() if rows.get(clip_id) == [text]
        )
        if submission.outcome == "stored":
            lost += len(submission.captions) - matching
        elif submission.outcome == "gave up":
            unconfirmed_stored += matching
            unconfirmed_missing += len(submission.captions) - matching
    for assignment_id, rows in stored.items():
        sent_captions = sent[assignment_id].captions if assignment_id in sent else {}
        for clip_id, texts in rows.items():
            duplicated += len(texts) - 1
            if sent_captions.get(clip_id) not in texts:
                phantom += 1
    return {
        "lost": lost,
        "phantom": phantom,
        "duplicated": duplicated,
        "unconfirmed, stored": unconfirmed_stored,
        "unconfirmed, not stored": unconfirmed_missing,
    }


def _jobs_table() -> list[str]:
    from django.db.models import Count, Max

    from core.models import Job

    rows = (
        Job.objects.values("kind", "state")
        .annotate(n=Count("id"), most=Max("attempts"))
        .order_by("kind", "state")
    )
    lines = ["| kind | state | jobs | most executions of one |", "|---|---|---:|---:|"]
    lines += [f"| {r['kind']} | {r['state']} | {r['n']} | {r['most']} |" for r in rows]
    errors = Counter(
        f"{kind}: {error.strip().splitlines()[0][:160] if error.strip() else '(no error)'}"
        for kind, error in Job.objects.filter(state=Job.State.FAILED).values_list("kind", "error")
    )
    if errors:
        lines += ["", "Why jobs failed:"]
        lines += [f"- {reason} ({n})" for reason, n in errors.most_common()]
    return lines


def _healthz(port: int, token: str) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/healthz", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return f"{response.status} {response.read().decode()[:300]}"
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.read().decode()[:600]}"
    except OSError as exc:
        return f"unreachable: {exc}"


def _empty_broker(url: str) -> None:
    """Drops what an earlier run left on the broker: queued messages, and on Redis those
    its killed workers held, which Redis would hand out again later, naming jobs of the
    earlier run's database."""
    from earmark.celery import app

    app.control.purge()
    if url.startswith(("redis://", "rediss://")):
        import redis

        redis.Redis.from_url(url).delete("unacked", "unacked_index", "unacked_mutex")


# Main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=85, help="simulated crowdworkers")
    parser.add_argument("--duration", type=float, default=150.0, help="seconds of load")
    parser.add_argument(
        "--offered",
        type=float,
        default=40.0,
        metavar="LOOPS_PER_S",
        help="loops/s the workers offer together (think time); 0: none",
    )
    parser.add_argument("--fault-every", type=float, default=10.0, help="seconds between faults")
    parser.add_argument(
        "--drop-answers",
        type=float,
        default=0.05,
        metavar="SHARE",
        help="share of submits whose answer the client hangs up on, then sends again",
    )
    parser.add_argument("--gunicorn-kills", type=int, default=2, help="workers killed per fault")
    parser.add_argument("--celery-down", type=float, default=5.0, help="seconds before restart")
    parser.add_argument(
        "--settle",
        type=float,
        default=300.0,
        help="seconds after the last fault by which every job must be final",
    )
    parser.add_argument(
        "--stats-every", type=float, default=15.0, help="seconds between statistics jobs; 0: none"
    )
    parser.add_argument("--clips", type=int, default=20_000)
    parser.add_argument("--captions-per-clip", type=int, default=5)
    parser.add_argument(
        "--time-allotted",
        type=float,
        default=120.0,
        help="seconds a worker has for a HIT; an assignment a client gave up on expires after",
    )
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    parser.add_argument("--celery-concurrency", type=int, default=2)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="earmark_chaos")
    parser.add_argument(
        "--broker", default="redis://127.0.0.1:6379/4", help="a Redis database of its own"
    )
    parser.add_argument("--keep-database", action="store_true")
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    if not args.broker.startswith(("redis://", "rediss://", "amqp://", "pyamqp://")):
        parser.error("--broker must be a Redis or AMQP URL: the worker is killed mid-job")
    try:
        extra = {
            # disagreement checks every 10 s instead of 60 s: several batch_flag jobs run
            # (and are hit) during the load
            "ACTIVE_FLAG_SWEEP_SECONDS": "10",
            "HEALTHZ_TOKEN": "chaos-monitoring",
            **parse_sets(args.set),
        }
    except ValueError as exc:
        parser.error(str(exc))

    var = tempfile.mkdtemp(prefix="earmark-chaos-")
    env = server_environment(
        database_url=f"{args.server}/{args.database}",
        var=var,
        broker=args.broker,
        extra=extra,
    )
    began = time.perf_counter()
    recreate_database(args.server, args.database)
    django_migrate(env)
    migrated = time.perf_counter()
    batch_id, tokens = seed(
        clips=args.clips,
        workers=args.workers,
        captions_per_clip=args.captions_per_clip,
        time_allotted=timedelta(seconds=args.time_allotted),
    )
    from django.contrib.auth import get_user_model
    from django.db import connection

    from core.services import api_token_create

    researcher = get_user_model().objects.get(username=RESEARCHER)
    _, researcher_token = api_token_create(user=researcher, name="chaos")
    pg_version = postgres_version()
    connection.close()
    _empty_broker(args.broker)
    print(
        f"database {args.database}: migrated in {migrated - began:.1f} s, {args.clips:,} clips "
        f"and {args.workers} workers seeded in {time.perf_counter() - migrated:.1f} s",
        flush=True,
    )

    logs = Path(var) / "log"
    deployment = Deployment(args, env, logs)
    record = Record()
    try:
        time.sleep(5)  # the worker and beat start up (they would in production too)
        start = asyncio.run(_run(args, tokens, researcher_token, deployment, record))
        ended = time.perf_counter()
        print(f"load ended at t={ended - start:.1f} s", flush=True)
        last_fault = start + (deployment.faults[-1][0] if deployment.faults else 0.0)
        waited, (jobs_left, unchecked, overdue) = _wait_settled(last_fault, args.settle)
        health = _healthz(args.port, extra["HEALTHZ_TOKEN"])
        connection.close()
        checks = integrity_checks(batch_id, args.captions_per_clip)
        compared = _compare(record)
        jobs_table = _jobs_table()
    finally:
        deployment.stop()
        connection.close()
        if not args.keep_database:
            drop_database(args.server, args.database)
        if args.keep_logs:
            print(f"logs kept in {logs}")
        else:
            shutil.rmtree(var, ignore_errors=True)

    outcomes = Counter(s.outcome for s in record.submissions.values())
    stored = [s for s in record.submissions.values() if s.outcome == "stored"]
    retried = sum(1 for s in stored if s.attempts > 1)
    refused = {o: n for o, n in outcomes.items() if o.startswith("refused")}
    faults = Counter(kind for _, kind, _ in deployment.faults)
    print()
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{socket.gethostname()}, Python {platform.python_version()}, PostgreSQL {pg_version}, "
        f"broker {args.broker.split('://')[0]}. Deployment: gunicorn {args.gunicorn_workers} "
        f"sync workers, Celery worker -c {args.celery_concurrency} (default, media, text, "
        f"sweeps), beat; production settings, ACTIVE_FLAG_SWEEP_SECONDS=10"
        + (f", {', '.join(args.set)}" if args.set else "")
        + f". Load: {args.workers} workers for {args.duration:.0f} s, "
        + (f"{args.offered:g} loops/s offered" if args.offered else "no think time")
        + f"; {args.clips:,} clips x {args.captions_per_clip} captions, 1 clip per HIT, "
        f"{args.time_allotted:.0f} s allotted per HIT. Faults every {args.fault_every:g} s: "
        f"{faults['gunicorn']} x kill -9 of {args.gunicorn_kills} gunicorn workers, "
        f"{faults['database']} x pg_terminate_backend of every connection, "
        f"{faults['celery']} x kill -9 of the Celery worker (restarted after "
        f"{args.celery_down:g} s)."
    )
    loads = record.load_average
    print(
        f"Load average (1 min) during the load: {min(loads):.1f} to {max(loads):.1f}, "
        f"mean {sum(loads) / len(loads):.1f}, on {os.cpu_count()} CPUs"
    )
    print()
    print("Clients:")
    print(
        f"- loops completed: {record.loops:,} ({record.loops / args.duration:.1f}/s; "
        f"p50 {percentile(record.loop_ms, 50):.0f} ms, p95 {percentile(record.loop_ms, 95):.0f} "
        f"ms, p99 {percentile(record.loop_ms, 99):.0f} ms), no work (204): {record.no_work}"
    )
    print(
        f"- submits answered 200: {outcomes['stored']:,}, of which after a retry: {retried} "
        f"({record.answered_from_store} answered with what an earlier attempt had stored; "
        f"{record.answers_dropped} answers dropped on purpose); "
        f"refused: {sum(refused.values())} "
        f"({', '.join(f'{o}: {n}' for o, n in refused.items()) or '-'}); "
        f"given up: {outcomes['gave up']}"
    )
    print(
        "- failed requests, each sent again: "
        + (", ".join(f"{k} x {n}" for k, n in sorted(record.failures.items())) or "none")
    )
    if record.gave_up:
        print(f"- requests given up after {MAX_ATTEMPTS} attempts: {dict(record.gave_up)}")
    print(f"- statistics jobs queued by the researcher: {len(record.jobs)}")
    print()
    print("Database against the clients:")
    print(
        f"- captions lost / phantom / duplicated: {compared['lost']} / {compared['phantom']} / "
        f"{compared['duplicated']} (target 0 / 0 / 0)"
    )
    print(
        f"- captions of submits the client gave up on: {compared['unconfirmed, stored']} stored, "
        f"{compared['unconfirmed, not stored']} not"
    )
    for name, value in checks.items():
        print(f"- {name}: {value:,}")
    print(f"- assignments still open past their deadline: {overdue} (target 0)")
    print()
    print(
        f"Jobs {waited:.0f} s after the last fault: {jobs_left} not final (target 0); "
        f"{unchecked} submitted captions never checked for disagreement (target 0)"
    )
    print()
    print("\n".join(jobs_table))
    print()
    print(f"/healthz after the run: {health}")
    failed = bool(
        compared["lost"]
        or compared["phantom"]
        or compared["duplicated"]
        or any(checks[k] for k in VIOLATIONS)
        or jobs_left
        or unchecked
        or overdue
        or outcomes.get("refused 409")
    )
    if failed:
        raise SystemExit("chaos: a target was missed (see above)")
    print("chaos: every target met")


if __name__ == "__main__":
    main()
