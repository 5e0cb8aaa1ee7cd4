"""A real deployment for the annotation load benchmarks (load_claim_submit.py, chaos.py):
a private PostgreSQL database, one published batch with a worker and an API token per
simulated worker, gunicorn with the production settings, and the database checks run
after the load."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
CAPTIONS = (
    "a dog barks while cars pass by in the distance",
    "a man speaks softly as birds chirp nearby",
    "water trickles steadily and a door creaks open",
    "an engine idles loudly then revs up twice",
    "rain falls on a roof while thunder rumbles far away",
)
LOAD_AUDIO = "clips/audio/load.wav"
RESEARCHER = "researcher"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 10) - 1]


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


# Database ---------------------------------------------------------------------------------


def recreate_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_environment(
    *, database_url: str, var: str, broker: str, extra: dict[str, str]
) -> dict[str, str]:
    """The settings every process of the deployment runs with: production (DEBUG off) on
    plain HTTP, rate limits out of the way, then `extra` (the benchmark's --set)."""
    import secrets

    return {
        "DATABASE_URL": database_url,
        "EARMARK_VAR_DIR": var,
        "SECRET_KEY": secrets.token_urlsafe(40),
        "DEBUG": "0",
        "HTTPS": "0",  # gunicorn on plain HTTP, no TLS proxy in front
        "LOG_LEVEL": "WARNING",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SETTINGS_MODULE": "earmark.settings",
        "CELERY_BROKER_URL": broker,
        # the server is measured, not its per-worker rate limits: a simulated worker with
        # no think time claims far faster than API_RATE_WORK allows a person, so both are
        # raised, only as far as one worker looping alone needs (3 calls a loop, 2 of them
        # claim and submit: up to 125 loops/s); the throttles still count every call
        "API_RATE_PER_USER": "30000/min",
        "API_RATE_WORK": "15000/min",
        **extra,
    }


def parse_sets(items: list[str]) -> dict[str, str]:
    """The benchmarks' repeatable `--set NAME=VALUE` as environment variables."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--set {item!r}: give NAME=VALUE")
        out[name] = value
    return out


def django_migrate(env: dict[str, str]) -> None:
    """Sets this process up on the deployment's settings and migrates its database."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def postgres_version() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return str(cursor.fetchone()[0])


def load_wav() -> bytes:
    """10 ms of silence as a WAV: the server checks a clip's audio reads before serving it."""
    import io
    import wave

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(bytes(160))
    return buffer.getvalue()


def seed(
    *,
    clips: int,
    workers: int,
    captions_per_clip: int,
    time_allotted: timedelta = timedelta(hours=1),
) -> tuple[int, list[str]]:
    """One published batch over `clips` fetched clips (AudioCaps validation style: one
    clip per HIT) of the project "load", owned by RESEARCHER; returns its id and one API
    token per worker."""
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from django.db import connection

    from annotation.services import batch_publish
    from core.models import Role
    from core.services import api_token_create, membership_add, project_create
    from curation.models import Clip, Split, Subset, SubsetClip

    default_storage.save(LOAD_AUDIO, ContentFile(load_wav()))
    users = get_user_model().objects
    boss = users.create_user(RESEARCHER)
    project = project_create(name="Load test", slug="load", created_by=boss)
    rows = Clip.objects.bulk_create(
        (
            Clip(
                source=Clip.Source.YOUTUBE,
                youtube_id=f"ld{i:09d}",
                start_seconds=Decimal(0),
                end_seconds=Decimal(10),
                # clips that play through at once: a worker's submit right after fetching
                # the audio passes the server's "heard to the end" check, no waiting
                duration_seconds=0.001,
                status=Clip.Status.READY,
                audio=LOAD_AUDIO,
            )
            for i in range(clips)
        ),
        batch_size=5000,
    )
    subset = Subset.objects.create(project=project, name="Load", slug="load")
    SubsetClip.objects.bulk_create(
        (SubsetClip(subset=subset, clip=c, split=Split.VAL) for c in rows), batch_size=5000
    )
    batch = batch_publish(
        subset=subset,
        split=Split.VAL,
        name="Load",
        captions_per_clip=captions_per_clip,
        clips_per_hit=1,
        reward_cents=5,
        time_allotted=time_allotted,
        lifetime=timedelta(days=7),
        created_by=boss,
    )
    tokens = []
    people = users.bulk_create(users.model(username=f"w{i:04d}") for i in range(workers))
    for person in people:
        membership_add(project=project, user=person, role=Role.ANNOTATOR)
        tokens.append(api_token_create(user=person, name="load")[1])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return batch.pk, tokens


# The simulated annotators' loop -----------------------------------------------------------


class LoopFailed(Exception):
    """A loop the server answered with an error; its message is the key counted in
    `Level.errors` ("claim 500", "audio 403", …)."""


class NoWork(Exception):
    """The server had no task for this worker (Earmark's claim answered 204)."""


# One loop of worker `number` on the shared session; returns the perf_counter time at which
# the first request (claim, or Label Studio's next task) was answered, or raises LoopFailed,
# NoWork or a client error. load_claim_submit.py runs any such loop with one worker, level
# and meter, so Earmark and Label Studio are measured by the same client.
LoopFn = Callable[[Any, int], Awaitable[float]]


# Processes --------------------------------------------------------------------------------


def start_gunicorn(
    *,
    port: int,
    workers: int,
    env: dict[str, str],
    worker_class: str = "sync",
    threads: int = 1,
    output: IO[bytes] | None = None,
) -> subprocess.Popen[bytes]:
    """gunicorn on 127.0.0.1:`port`, once it answers; its log goes to `output` (default:
    this process's own stdout and stderr)."""
    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        "earmark.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        worker_class,
        "--threads",
        str(threads),
        "--backlog",
        "2048",
        "--log-level",
        "warning",
    ]
    server = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **env}, stdout=output, stderr=output
    )
    return wait_until_answering(
        server, f"http://127.0.0.1:{port}/api/openapi.json", name="gunicorn", timeout=60.0
    )


def wait_until_answering(
    server: subprocess.Popen[bytes],
    url: str,
    *,
    name: str,
    timeout: float,
    log: Path | None = None,
) -> subprocess.Popen[bytes]:
    """`server` once `url` answers 200; SystemExit naming `name` (with the end of `log`, if
    given) if the process exits first or nothing answers within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            tail = "" if log is None else ":\n" + log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"{name} exited with {server.returncode}{tail}")
        try:
            with urllib.request.urlopen(url) as answer:
                if answer.status == 200:
                    return server
        except OSError:
            pass
        time.sleep(0.3)
    server.terminate()
    raise SystemExit(f"{name} did not answer within {timeout:.0f} s")


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (gunicorn's workers, a Celery pool)."""
    pids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(p) for p in (task / "children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []
    return pids


# Checks -----------------------------------------------------------------------------------

# name -> SQL counting a violation (target 0), or a total ("assignments submitted", …)
INTEGRITY_SQL = {
    # a worker holding, having done or having been rejected on a clip twice
    "worker twice on a clip": """
        SELECT count(*) FROM (
            SELECT a.worker_id, hc.clip_id FROM annotation_assignment a
            JOIN annotation_hitclip hc ON hc.hit_id = a.hit_id
            JOIN annotation_hit h ON h.id = a.hit_id
            WHERE h.batch_id = %(batch)s
              AND a.state IN ('accepted', 'submitted', 'approved', 'rejected')
            GROUP BY 1, 2 HAVING count(*) > 1) d""",
    "caption of a worker on a clip twice": """
        SELECT count(*) FROM (
            SELECT a.worker_id, c.clip_id FROM annotation_caption c
            JOIN annotation_assignment a ON a.id = c.assignment_id
            GROUP BY 1, 2 HAVING count(*) > 1) d""",
    "HITs over-filled": """
        SELECT count(*) FROM (
            SELECT h.id FROM annotation_hit h
            JOIN annotation_assignment a ON a.hit_id = h.id
            WHERE h.batch_id = %(batch)s
              AND a.state IN ('accepted', 'submitted', 'approved')
            GROUP BY h.id, h.max_assignments HAVING count(*) > h.max_assignments) d""",
    "clips with too many captions": """
        SELECT count(*) FROM (
            SELECT c.clip_id FROM annotation_caption c
            GROUP BY 1 HAVING count(*) > %(per_clip)s) d""",
    "HITs whose taken disagrees": """
        SELECT count(*) FROM annotation_hit h
        LEFT JOIN (
            SELECT hit_id, count(*) AS n FROM annotation_assignment
            WHERE state IN ('accepted', 'submitted', 'approved') GROUP BY hit_id
        ) a ON a.hit_id = h.id
        WHERE h.batch_id = %(batch)s AND h.taken <> coalesce(a.n, 0)""",
    "assignments left accepted": """
        SELECT count(*) FROM annotation_assignment WHERE state = 'accepted'""",
    "submitted assignments": """
        SELECT count(*) FROM annotation_assignment WHERE state = 'submitted'""",
    "captions": "SELECT count(*) FROM annotation_caption",
}
# the counts above that must be 0 whatever happened (a worker's open assignment at the end
# is the caller's to judge)
VIOLATIONS = (
    "worker twice on a clip",
    "caption of a worker on a clip twice",
    "HITs over-filled",
    "clips with too many captions",
    "HITs whose taken disagrees",
)


def integrity_checks(batch_id: int, captions_per_clip: int) -> dict[str, int]:
    from django.db import connection

    out: dict[str, int] = {}
    with connection.cursor() as cursor:
        for name, sql in INTEGRITY_SQL.items():
            cursor.execute(sql, {"batch": batch_id, "per_clip": captions_per_clip})
            row: Any = cursor.fetchone()
            out[name] = int(row[0])
    return out
