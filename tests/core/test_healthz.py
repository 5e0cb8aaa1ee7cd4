"""/healthz: 200 when the database, the broker and a worker for every required queue are
up; 503 naming what is not (a queue nobody serves by name, with since when).

External tools (ffmpeg, java, LanguageTool) are reported but never decide the status, and
are probed once per HEALTHZ_PROBE_SECONDS. What each check found is for staff and for
monitoring with HEALTHZ_TOKEN; anyone else learns only what passed.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from core.models import WorkerHeartbeat
from earmark.celery import app as celery_app

UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"
MONITORING_TOKEN = "monitoring-secret-for-tests"


def _fake_tool(folder: Path, name: str, *, line: str, stream: str = "stdout") -> str:
    """An executable that prints one version line, like `ffmpeg -version` or `java -version`,
    and counts its runs in `<name>.runs`."""
    path = folder / name
    redirect = " >&2" if stream == "stderr" else ""
    path.write_text(f"#!/bin/sh\necho run >> '{folder / name}.runs'\necho '{line}'{redirect}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture(autouse=True)
def tools(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fast, predictable stand-ins for ffmpeg and java; no LanguageTool anywhere."""
    settings.FFMPEG_BINARY = _fake_tool(tmp_path, "ffmpeg", line="ffmpeg version 7.1-test")
    settings.JAVA_BINARY = _fake_tool(
        tmp_path, "java", line='openjdk version "21.0.5-test"', stream="stderr"
    )
    settings.LANGUAGETOOL_URL = ""
    settings.LTP_JAR_DIR_PATH = ""
    settings.LANGUAGETOOL_DOWNLOAD = False
    settings.HEALTHZ_TOKEN = MONITORING_TOKEN
    monkeypatch.setenv("HOME", str(tmp_path))  # no downloaded LanguageTool in ~/.cache
    monkeypatch.delenv("LTP_PATH", raising=False)


@pytest.fixture
def heartbeat(db: None) -> WorkerHeartbeat:
    return WorkerHeartbeat.objects.create(
        hostname="celery@health", queues="default,gpu,media,text", pid=4242
    )


@pytest.fixture
def unreachable_broker(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Points Django settings and the already-configured Celery app at a closed port.

    Celery reads its broker URL from the CELERY_BROKER_URL variable before its own
    config, so the variable is overridden too (it is set in the PostgreSQL+Redis run).
    """
    previous = celery_app.conf.broker_url
    settings.CELERY_BROKER_URL = UNREACHABLE_BROKER
    monkeypatch.setenv("CELERY_BROKER_URL", UNREACHABLE_BROKER)
    # conf[key] = … is what conf.key = … does at run time; the stubs declare broker_url
    # read-only (a getter that prefers the environment variable)
    celery_app.conf["broker_url"] = UNREACHABLE_BROKER
    try:
        yield
    finally:
        celery_app.conf["broker_url"] = previous


def _healthz() -> Any:
    """/healthz as monitoring reads it, with every check's findings."""
    return Client().get("/healthz", headers={"Authorization": f"Bearer {MONITORING_TOKEN}"})


@pytest.mark.usefixtures("heartbeat")
def test_it_reports_ok_when_database_broker_and_worker_are_up() -> None:
    response = _healthz()
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert {name: body["checks"][name]["ok"] for name in ("database", "broker", "workers")} == {
        "database": True,
        "broker": True,
        "workers": True,
    }


@pytest.mark.usefixtures("heartbeat")
def test_it_names_the_queues_the_live_workers_serve() -> None:
    response = _healthz()
    assert response.status_code == 200
    assert response.json()["checks"]["workers"]["detail"] == (
        "1 worker(s) alive; queues served: default, gpu, media, text"
    )


def test_it_is_down_naming_the_core_queues_no_worker_serves(db: None) -> None:
    WorkerHeartbeat.objects.create(hostname="celery@cpu", queues="default,media", pid=1)
    response = _healthz()
    assert response.status_code == 503
    assert response.json()["status"] == "down"
    workers = response.json()["checks"]["workers"]
    assert workers["ok"] is False
    assert workers["detail"].endswith(
        "no worker for: text (no worker has served it), gpu (no worker has served it)"
    )


def test_it_is_down_while_the_only_worker_of_a_queue_is_dead_saying_since_when(
    heartbeat: WorkerHeartbeat,
) -> None:
    """The incident of issue 31: the cpu worker died and the gpu one kept the check green."""
    WorkerHeartbeat.objects.filter(pk=heartbeat.pk).update(queues="gpu")
    died = timezone.now() - timedelta(minutes=28)
    WorkerHeartbeat.objects.create(
        hostname="cpu@host", queues="default,media,text", pid=2, last_seen=died
    )
    response = _healthz()
    assert response.status_code == 503
    since = f"{timezone.localtime(died):%H:%M}"
    assert response.json()["checks"]["workers"]["detail"] == (
        "1 worker(s) alive; queues served: gpu; no worker for: "
        f"default (since {since}), media (since {since}), text (since {since})"
    )


def test_a_worker_that_stopped_cleanly_no_longer_serves_its_queues(
    heartbeat: WorkerHeartbeat,
) -> None:
    stopped = timezone.now() - timedelta(minutes=5)
    WorkerHeartbeat.objects.filter(pk=heartbeat.pk).update(stopped_at=stopped)
    WorkerHeartbeat.objects.create(hostname="celery@other", queues="default,media,text", pid=3)
    response = _healthz()
    assert response.status_code == 503
    assert response.json()["checks"]["workers"]["detail"].endswith(
        f"no worker for: gpu (since {timezone.localtime(stopped):%H:%M})"
    )


def test_anyone_learns_the_workers_check_failed(db: None) -> None:
    WorkerHeartbeat.objects.create(hostname="celery@cpu", queues="gpu", pid=1)
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["workers"] == {"ok": False, "core": True}


def test_a_site_that_never_trains_may_leave_the_gpu_queue_out(settings: Any, db: None) -> None:
    settings.HEALTHZ_REQUIRED_QUEUES = ["default", "media", "text"]
    WorkerHeartbeat.objects.create(hostname="celery@cpu", queues="default,media,text", pid=1)
    response = _healthz()
    assert response.status_code == 200
    assert response.json()["checks"]["workers"]["ok"] is True


def test_it_is_down_without_a_worker_heartbeat(db: None) -> None:
    response = _healthz()
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "down"
    assert body["checks"]["workers"] == {
        "ok": False,
        "detail": "no Celery worker has sent a heartbeat recently",
        "core": True,
    }


def test_it_is_down_when_the_only_heartbeat_is_stale(heartbeat: WorkerHeartbeat) -> None:
    stale = timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS + 5)
    WorkerHeartbeat.objects.filter(pk=heartbeat.pk).update(last_seen=timezone.now() - stale)
    response = _healthz()
    assert response.status_code == 503
    assert response.json()["status"] == "down"
    assert response.json()["checks"]["workers"]["ok"] is False


def test_it_counts_a_heartbeat_inside_the_window(heartbeat: WorkerHeartbeat) -> None:
    recent = timedelta(seconds=3 * settings.WORKER_HEARTBEAT_SECONDS - 5)
    WorkerHeartbeat.objects.filter(pk=heartbeat.pk).update(last_seen=timezone.now() - recent)
    response = _healthz()
    assert response.status_code == 200
    assert response.json()["checks"]["workers"]["ok"] is True


@pytest.mark.usefixtures("heartbeat", "unreachable_broker")
def test_it_is_down_when_the_broker_is_unreachable() -> None:
    response = _healthz()
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "down"
    assert body["checks"]["broker"]["ok"] is False
    assert body["checks"]["broker"]["detail"].startswith("redis broker unreachable:")


@pytest.mark.usefixtures("heartbeat")
def test_it_reports_ffmpeg_and_java_versions() -> None:
    response = _healthz()
    assert response.status_code == 200
    checks = response.json()["checks"]
    assert checks["ffmpeg"] == {"ok": True, "detail": "ffmpeg version 7.1-test", "core": False}
    assert checks["java"] == {"ok": True, "detail": 'openjdk version "21.0.5-test"', "core": False}


@pytest.mark.usefixtures("heartbeat")
def test_it_stays_up_without_languagetool() -> None:
    response = _healthz()
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    languagetool = response.json()["checks"]["languagetool"]
    assert languagetool["ok"] is False
    assert languagetool["detail"].startswith("not available")


@pytest.mark.usefixtures("heartbeat")
def test_it_reports_a_languagetool_jar_dir_without_jars(settings: Any, tmp_path: Path) -> None:
    settings.LTP_JAR_DIR_PATH = str(tmp_path)
    response = _healthz()
    assert response.status_code == 200
    assert response.json()["checks"]["languagetool"] == {
        "ok": False,
        "detail": f"LTP_JAR_DIR_PATH={tmp_path}: the folder must keep its unzipped name "
        "LanguageTool-<version> (language-tool-python reads the version from it)",
        "core": False,
    }


@pytest.mark.usefixtures("heartbeat")
def test_it_finds_an_offline_languagetool(settings: Any, tmp_path: Path) -> None:
    install = tmp_path / "LanguageTool-6.8"
    install.mkdir()
    (install / "languagetool-server.jar").write_bytes(b"")
    settings.LTP_JAR_DIR_PATH = str(install)
    response = _healthz()
    assert response.status_code == 200
    assert response.json()["checks"]["languagetool"]["ok"] is True


@pytest.mark.usefixtures("heartbeat")
def test_it_stays_up_without_ffmpeg_and_java(settings: Any) -> None:
    settings.FFMPEG_BINARY = "/nonexistent/ffmpeg"
    settings.JAVA_BINARY = "/nonexistent/java"
    response = _healthz()
    assert response.status_code == 200
    checks = response.json()["checks"]
    assert checks["ffmpeg"]["ok"] is False
    assert checks["ffmpeg"]["detail"] == "/nonexistent/ffmpeg not found on PATH"
    assert checks["java"]["ok"] is False


@pytest.mark.usefixtures("heartbeat")
def test_it_is_never_cached() -> None:
    response = _healthz()
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.usefixtures("heartbeat")
def test_it_refuses_post() -> None:
    response = Client().post("/healthz")
    assert response.status_code == 405


# Who reads the findings -------------------------------------------------------------------


@pytest.mark.usefixtures("heartbeat")
def test_the_public_learns_what_passed_but_no_versions_hosts_or_errors() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["ffmpeg"] == {"ok": True, "core": False}
    assert body["checks"]["database"] == {"ok": True, "core": True}
    assert b"version" not in response.content
    assert b"queues" not in response.content


@pytest.mark.usefixtures("heartbeat")
def test_a_wrong_monitoring_token_reads_no_findings() -> None:
    response = Client().get("/healthz", headers={"Authorization": "Bearer guess"})
    assert "detail" not in response.json()["checks"]["java"]


@pytest.mark.usefixtures("heartbeat")
def test_without_a_monitoring_token_set_no_bearer_reads_findings(settings: Any) -> None:
    settings.HEALTHZ_TOKEN = ""
    response = Client().get("/healthz", headers={"Authorization": "Bearer "})
    assert "detail" not in response.json()["checks"]["java"]


@pytest.mark.usefixtures("heartbeat")
def test_staff_read_the_findings(staff: Any) -> None:
    client = Client()
    client.force_login(staff)
    assert client.get("/healthz").json()["checks"]["ffmpeg"]["detail"] == "ffmpeg version 7.1-test"


@pytest.mark.usefixtures("heartbeat")
def test_a_signed_in_researcher_reads_no_findings(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    assert "detail" not in client.get("/healthz").json()["checks"]["ffmpeg"]


# Probes ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("heartbeat")
def test_java_is_started_once_for_many_health_checks(tmp_path: Path) -> None:
    for _ in range(5):
        assert Client().get("/healthz").status_code == 200
    assert (tmp_path / "java.runs").read_text().splitlines() == ["run"]
    assert (tmp_path / "ffmpeg.runs").read_text().splitlines() == ["run"]


@pytest.mark.usefixtures("heartbeat")
def test_tools_are_probed_again_once_the_probe_period_is_over(
    settings: Any, tmp_path: Path
) -> None:
    settings.HEALTHZ_PROBE_SECONDS = 0  # kept for no time at all
    for _ in range(3):
        Client().get("/healthz")
    assert len((tmp_path / "java.runs").read_text().splitlines()) == 3
