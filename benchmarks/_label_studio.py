"""Label Studio beside Earmark, for `load_claim_submit.py --compare-label-studio`.

Label Studio is never a dependency of this project: it runs from a venv of its own
(`--label-studio-venv`, made with `python3 -m venv V && V/bin/pip install
label-studio==1.23.2 gunicorn`), on the same PostgreSQL server as Earmark but in a database
of its own, under gunicorn with as many sync workers as Earmark gets, DEBUG off. Setting it
up runs Label Studio's own migrations and ORM in that venv's Python (the SETUP program
below), so nothing of Label Studio is imported here.

What is set up matches the Earmark side: one project whose labeling config is an audio
player and a caption textarea, one task per clip (overlap 1: one annotation a task), every
task's audio the same short WAV as Earmark's clips, uploaded into the project and served
by Label Studio's own authenticated file view (`/data/upload/…`, as an upload is served
when no cloud storage is set up), and one annotator a simulated worker, each with a
(legacy) API token, which the organization is set to accept.

The annotator's loop is what Label Studio's labeling stream does: GET
/api/projects/{id}/next (the next task, locked for this annotator), GET the task's audio,
POST /api/tasks/{id}/annotations/ with the caption.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from _deployment import CAPTIONS, LoopFailed, LoopFn, NoWork, wait_until_answering

LABEL_CONFIG = (
    "<View>"
    '<Audio name="audio" value="$audio"/>'
    '<TextArea name="caption" toName="audio" rows="2" editable="true" maxSubmissions="1"/>'
    "</View>"
)

# Run by the Label Studio venv's Python with Label Studio's settings: reads {"tasks": N,
# "annotators": N, "wav": path, "config": xml} on stdin, prints {"project": id, "tokens":
# [...]} as its last line.
SETUP = r"""
import json, sys

import django

django.setup()

from django.core.files import File
from django.db import connection
from data_import.models import FileUpload
from organizations.models import Organization
from projects.models import Project
from rest_framework.authtoken.models import Token
from tasks.models import Task
from users.models import User

spec = json.loads(sys.stdin.read())
owner = User.objects.create_user(email="owner@bench.local", password="unused-password-1")
organization = Organization.create_organization(created_by=owner, title="Bench")
owner.active_organization = organization
owner.save(update_fields=["active_organization"])
# the annotators authenticate as Earmark's do, with a token in a header; Label Studio 1.23
# turns its legacy API tokens off by default for a new organization
organization.jwt.legacy_api_tokens_enabled = True
organization.jwt.save()
project = Project.objects.create(
    title="Bench", created_by=owner, organization=organization,
    label_config=spec["config"], maximum_annotations=1,
)
with open(spec["wav"], "rb") as handle:
    upload = FileUpload(user=owner, project=project)
    upload.file.save("load.wav", File(handle), save=True)
audio = "/data/" + upload.file.name
Task.objects.bulk_create(
    (Task(data={"audio": audio}, project=project, file_upload=upload)
     for _ in range(spec["tasks"])),
    batch_size=5000,
)
tokens = []
for number in range(spec["annotators"]):
    user = User.objects.create_user(
        email=f"w{number:04d}@bench.local", password="unused-password-1"
    )
    organization.add_user(user)
    user.active_organization = organization
    user.save(update_fields=["active_organization"])
    tokens.append(Token.objects.get_or_create(user=user)[0].key)
project.update_tasks_states(
    maximum_annotations_changed=False, overlap_cohort_percentage_changed=False,
    tasks_number_changed=True,
)
with connection.cursor() as cursor:
    cursor.execute("ANALYZE")
print(json.dumps({"project": project.pk, "tokens": tokens}))
"""


def package_dir(venv: Path) -> Path:
    """The `label_studio` package folder inside `venv` (its Django project root)."""
    found = sorted(venv.glob("lib/python3*/site-packages/label_studio/core/wsgi.py"))
    if not found:
        raise SystemExit(
            f"{venv}: no Label Studio in this venv (looked for "
            "lib/python3*/site-packages/label_studio); make one with "
            f"`python3 -m venv {venv} && {venv}/bin/pip install label-studio==1.23.2 gunicorn`"
        )
    return found[-1].parents[1]


def environment(*, server: str, database: str, data_dir: Path) -> dict[str, str]:
    """Label Studio's settings: PostgreSQL `server`/`database`, DEBUG off, no Sentry, its
    media under `data_dir`; nothing of Earmark's environment (DATABASE_URL, DEBUG, …)."""
    import secrets
    from urllib.parse import urlsplit

    dsn = urlsplit(server)
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")
    return {
        **{name: os.environ[name] for name in keep if name in os.environ},
        "DJANGO_SETTINGS_MODULE": "core.settings.label_studio",
        "DJANGO_DB": "default",
        "POSTGRE_NAME": database,
        "POSTGRE_USER": dsn.username or "postgres",
        "POSTGRE_PASSWORD": dsn.password or "",
        "POSTGRE_HOST": dsn.hostname or "127.0.0.1",
        "POSTGRE_PORT": str(dsn.port or 5432),
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "SECRET_KEY": secrets.token_urlsafe(40),
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "SENTRY_DSN": "",
        "FRONTEND_SENTRY_DSN": "",
        "COLLECT_ANALYTICS": "false",
        "LATEST_VERSION_CHECK": "false",  # else each worker asks pypi.org at start
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
    }


def setup(
    *, venv: Path, env: dict[str, str], tasks: int, annotators: int, wav: bytes, scratch: Path
) -> tuple[int, list[str]]:
    """Migrates Label Studio's database and seeds it (see SETUP); returns the project's id
    and one API token per annotator."""
    root = package_dir(venv)
    python = str(venv / "bin" / "python")
    migrate = subprocess.run(
        [python, "manage.py", "migrate", "--no-input"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    if migrate.returncode != 0:
        raise SystemExit(f"Label Studio's migrate failed:\n{migrate.stderr[-3000:]}")
    wav_path = scratch / "load.wav"
    wav_path.write_bytes(wav)
    spec = {"tasks": tasks, "annotators": annotators, "wav": str(wav_path), "config": LABEL_CONFIG}
    seeded = subprocess.run(
        [python, "-c", SETUP],
        cwd=root,
        env=env,
        input=json.dumps(spec),
        capture_output=True,
        text=True,
    )
    if seeded.returncode != 0:
        raise SystemExit(f"Label Studio's setup failed:\n{seeded.stderr[-3000:]}")
    answer = json.loads(seeded.stdout.strip().splitlines()[-1])
    return int(answer["project"]), [str(token) for token in answer["tokens"]]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(
    *,
    venv: Path,
    env: dict[str, str],
    port: int,
    workers: int,
    log: Path,
    timeout: float = 120.0,
) -> subprocess.Popen[bytes]:
    """Label Studio under gunicorn (`workers` sync workers) on 127.0.0.1:`port`, once its
    /health/ answers; its output (chatty at start even at WARNING) goes to `log`."""
    gunicorn = venv / "bin" / "gunicorn"
    if not gunicorn.exists():
        raise SystemExit(f"{gunicorn} is missing: `{venv}/bin/pip install gunicorn`")
    command = [
        str(gunicorn),
        "core.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--backlog",
        "2048",
        "--log-level",
        "warning",
    ]
    with log.open("ab") as output:
        server = subprocess.Popen(
            command, cwd=package_dir(venv), env=env, stdout=output, stderr=subprocess.STDOUT
        )
    return wait_until_answering(
        server,
        f"http://127.0.0.1:{port}/health/",
        name="Label Studio's gunicorn",
        timeout=timeout,
        log=log,
    )


def annotation(caption: str) -> dict[str, Any]:
    """The body of an annotation holding `caption` in LABEL_CONFIG's textarea."""
    return {
        "result": [
            {
                "from_name": "caption",
                "to_name": "audio",
                "type": "textarea",
                "value": {"text": [caption]},
            }
        ],
        "lead_time": 1.0,
    }


def loop(tokens: list[str], project: int) -> LoopFn:
    """A Label Studio annotator's loop, as worker `number` (tokens[number]): the next task,
    its audio, the annotation. A 404 on the next task is "no task left" (Label Studio's
    answer when the queue is empty)."""

    async def one(session: Any, number: int) -> float:
        headers = {"Authorization": f"Token {tokens[number]}"}
        async with session.get(f"/api/projects/{project}/next", headers=headers) as nxt:
            body = await nxt.read()
        fetched = time.perf_counter()
        if nxt.status == 404:
            raise NoWork
        if nxt.status != 200:
            raise LoopFailed(f"next {nxt.status}")
        task = json.loads(body)
        async with session.get(task["data"]["audio"], headers=headers) as audio:
            await audio.read()
        if audio.status != 200:
            raise LoopFailed(f"audio {audio.status}")
        async with session.post(
            f"/api/tasks/{task['id']}/annotations/",
            headers={**headers, "Content-Type": "application/json"},
            data=json.dumps(annotation(CAPTIONS[number % len(CAPTIONS)])),
        ) as created:
            await created.read()
        if created.status != 201:
            raise LoopFailed(f"annotate {created.status}")
        return fetched

    return one


INTEGRITY_SQL = {
    "annotations": "SELECT count(*) FROM task_completion",
    "tasks annotated more than once": (
        "SELECT count(*) FROM (SELECT task_id FROM task_completion GROUP BY task_id"
        " HAVING count(*) > 1) AS twice"
    ),
    "annotations by one annotator on one task twice": (
        "SELECT count(*) FROM (SELECT task_id, completed_by_id FROM task_completion"
        " GROUP BY task_id, completed_by_id HAVING count(*) > 1) AS again"
    ),
}


def integrity(dsn: str) -> dict[str, int]:
    """Counts in Label Studio's database after the run: annotations, and the duplicates
    (with overlap 1, a task annotated twice is one)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        counts = {}
        for name, sql in INTEGRITY_SQL.items():
            row = conn.execute(sql).fetchone()
            counts[name] = int(row[0]) if row else 0
    return counts
