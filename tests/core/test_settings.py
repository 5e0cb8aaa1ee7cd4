"""Settings come from the environment; a malformed variable must stop start-up by name."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from earmark.env import (
    env_bool,
    env_broker,
    env_cache,
    env_database,
    env_int,
    env_list,
    env_proxy_ssl_header,
    env_rate,
)

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_FILE = ROOT / "earmark" / "settings.py"
SQLITE_DEFAULT = "sqlite:////tmp/earmark-default.sqlite3"

# (variable, malformed value, the reader settings.py calls it with)
MALFORMED: list[tuple[str, str, Callable[[], Any]]] = [
    ("DEBUG", "maybe", lambda: env_bool("DEBUG")),
    ("WORKER_HEARTBEAT_SECONDS", "abc", lambda: env_int("WORKER_HEARTBEAT_SECONDS", 10, minimum=1)),
    ("WORKER_HEARTBEAT_SECONDS", "0", lambda: env_int("WORKER_HEARTBEAT_SECONDS", 10, minimum=1)),
    ("DATABASE_URL", "mysql://x/y", lambda: env_database("DATABASE_URL", SQLITE_DEFAULT)),
    ("DATABASE_URL", "postgres://host", lambda: env_database("DATABASE_URL", SQLITE_DEFAULT)),
    ("DATABASE_HEALTH_CHECKS", "maybe", lambda: env_bool("DATABASE_HEALTH_CHECKS")),
    ("CELERY_BROKER_URL", "kafka://x", lambda: env_broker("CELERY_BROKER_URL", "filesystem://")),
    ("API_RATE_WORK", "60 per minute", lambda: env_rate("API_RATE_WORK", "60/min")),
    ("API_RATE_WORK", "0/min", lambda: env_rate("API_RATE_WORK", "60/min")),
    ("API_RATE_WORK", "5/0min", lambda: env_rate("API_RATE_WORK", "60/min")),
    ("CACHE_URL", "memcached://x", lambda: env_cache("CACHE_URL")),
    (
        "SECURE_PROXY_SSL_HEADER",
        "X-Forwarded-Proto",
        lambda: env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER"),
    ),
]
MALFORMED_IDS = [f"{name}={value}" for name, value, _ in MALFORMED]


def _startup_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """The current environment minus everything settings.py reads, plus `overrides`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in {
            "DEBUG",
            "SECRET_KEY",
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "WORKER_HEARTBEAT_SECONDS",
            "DJANGO_SETTINGS_MODULE",
        }
    }
    env.update(
        DJANGO_SETTINGS_MODULE="earmark.settings",
        EARMARK_VAR_DIR=str(tmp_path / "var"),
        SECRET_KEY="startup-test-secret",
    )
    env.update(overrides)
    return env


def _django_setup(env: dict[str, str], code: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(){code}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# Readers -------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "value", "read"), MALFORMED, ids=MALFORMED_IDS)
def test_it_names_the_variable_when_a_value_is_malformed(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, read: Callable[[], Any]
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=name):
        read()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("TRUE", True), (" yes ", True), ("on", True), ("0", False), ("off", False)],
)
def test_it_parses_booleans(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool) -> None:
    monkeypatch.setenv("DEBUG", raw)
    assert env_bool("DEBUG", default=not expected) is expected


def test_it_uses_the_boolean_default_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEBUG", raising=False)
    assert env_bool("DEBUG", default=True) is True


def test_it_parses_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_HEARTBEAT_SECONDS", "25")
    assert env_int("WORKER_HEARTBEAT_SECONDS", 10, minimum=1) == 25


def test_it_uses_the_integer_default_when_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_HEARTBEAT_SECONDS", "")
    assert env_int("WORKER_HEARTBEAT_SECONDS", 10, minimum=1) == 10


def test_it_splits_lists_on_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALLOWED_HOSTS", " example.org, ,earmark.test ")
    assert env_list("ALLOWED_HOSTS", ["localhost"]) == ["example.org", "earmark.test"]


def test_it_defaults_to_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    config = env_database("DATABASE_URL", SQLITE_DEFAULT)
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == "/tmp/earmark-default.sqlite3"


def test_it_parses_a_postgres_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://earmark:s3cret@db.internal:6543/earmark")
    config = env_database("DATABASE_URL", SQLITE_DEFAULT)
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["USER"], config["PASSWORD"]) == ("earmark", "earmark", "s3cret")
    assert (config["HOST"], config["PORT"]) == ("db.internal", 6543)


def test_it_checks_kept_connections_before_reusing_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://earmark@db.internal:5432/earmark")
    config = env_database("DATABASE_URL", SQLITE_DEFAULT)
    assert (config["CONN_MAX_AGE"], config["CONN_HEALTH_CHECKS"]) == (60, True)
    unchecked = env_database("DATABASE_URL", SQLITE_DEFAULT, health_checks=False)
    assert unchecked["CONN_HEALTH_CHECKS"] is False


def test_it_accepts_a_redis_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://cache.internal:6379/2")
    assert env_broker("CELERY_BROKER_URL", "filesystem://") == "redis://cache.internal:6379/2"


def test_it_defaults_to_the_filesystem_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    assert env_broker("CELERY_BROKER_URL", "filesystem://") == "filesystem://"


def test_it_accepts_a_redis_broker_on_a_unix_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELERY_BROKER_URL", "redis+socket:///srv/earmark/redis.sock")
    assert (
        env_broker("CELERY_BROKER_URL", "filesystem://") == "redis+socket:///srv/earmark/redis.sock"
    )


# settings.py ---------------------------------------------------------------------------


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An environment where settings.py falls back to its defaults, writing under tmp_path."""
    for name in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EARMARK_VAR_DIR", str(tmp_path / "var"))


@pytest.mark.usefixtures("bare_env")
def test_it_refuses_to_start_without_a_secret_key_unless_debugging() -> None:
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY"):
        runpy.run_path(str(SETTINGS_FILE))


@pytest.mark.usefixtures("bare_env")
def test_it_keeps_a_random_key_in_the_var_dir_when_debugging(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DEBUG", "1")
    namespace = runpy.run_path(str(SETTINGS_FILE))
    assert namespace["DEBUG"] is True
    key_file = tmp_path / "var" / "dev-secret-key"
    assert namespace["SECRET_KEY"] == key_file.read_text().strip()
    assert len(namespace["SECRET_KEY"]) >= 50
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert runpy.run_path(str(SETTINGS_FILE))["SECRET_KEY"] == namespace["SECRET_KEY"]


@pytest.mark.usefixtures("bare_env")
def test_two_debug_installs_get_different_keys(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DEBUG", "1")
    first = runpy.run_path(str(SETTINGS_FILE))["SECRET_KEY"]
    monkeypatch.setenv("EARMARK_VAR_DIR", str(tmp_path / "other"))
    assert runpy.run_path(str(SETTINGS_FILE))["SECRET_KEY"] != first


@pytest.mark.usefixtures("bare_env")
def test_it_runs_without_servers_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SECRET_KEY", "x")
    namespace = runpy.run_path(str(SETTINGS_FILE))
    assert namespace["DATABASES"]["default"]["ENGINE"] == "django.db.backends.sqlite3"
    assert namespace["DATABASES"]["default"]["NAME"] == str(tmp_path / "var" / "earmark.sqlite3")
    # the private Redis `bin/earmark up` starts on a socket under the var dir, not kombu's
    # filesystem transport (which killed a worker of a full stack, issue 31)
    socket = tmp_path / "var" / "redis" / "redis.sock"
    assert namespace["CELERY_BROKER_URL"] == f"redis+socket://{socket}"
    assert namespace["EMBEDDED_REDIS_SOCKET"] == socket
    assert not (tmp_path / "var" / "broker").exists()


# Real start-up -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [(name, value) for name, value, _ in MALFORMED] + [("SECRET_KEY", "")],
    ids=[*MALFORMED_IDS, "SECRET_KEY="],
)
def test_it_stops_django_setup_naming_the_bad_variable(
    tmp_path: Path, name: str, value: str
) -> None:
    done = _django_setup(_startup_env(tmp_path, **{name: value}))
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert name in done.stderr


def test_it_starts_django_with_postgres_and_redis_urls(tmp_path: Path) -> None:
    env = _startup_env(
        tmp_path,
        DATABASE_URL="postgres://earmark@db.internal:5432/earmark",
        CELERY_BROKER_URL="redis://cache.internal:6379/0",
        WORKER_HEARTBEAT_SECONDS="5",
    )
    done = _django_setup(
        env,
        "; from django.conf import settings as s"
        "; print(s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL,"
        " s.WORKER_HEARTBEAT_SECONDS)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "django.db.backends.postgresql",
        "redis://cache.internal:6379/0",
        "5",
    ]


def test_it_reads_the_proxy_ssl_header_as_django_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto=https")
    assert env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER") == ("HTTP_X_FORWARDED_PROTO", "https")


def test_a_redis_cache_url_gives_the_shared_client_redis_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CACHE_URL", "redis://cache.internal:6379/1")
    assert env_cache("CACHE_URL")["default"] == {
        "BACKEND": "core.cache.RedisCache",
        "LOCATION": "redis://cache.internal:6379/1",
    }


@pytest.mark.usefixtures("bare_env")
def test_it_refuses_a_required_queue_that_does_not_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_KEY", "x")
    monkeypatch.setenv("HEALTHZ_REQUIRED_QUEUES", "default,gpus")
    with pytest.raises(
        ImproperlyConfigured, match="HEALTHZ_REQUIRED_QUEUES names no such queue: gpus"
    ):
        runpy.run_path(str(SETTINGS_FILE))


@pytest.mark.usefixtures("bare_env")
@pytest.mark.parametrize(
    ("name", "value"), [("MEDIA_SERVING", "nginx"), ("MEDIA_ACCEL_PREFIX", "protected")]
)
def test_it_refuses_a_media_serving_it_does_not_know(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv("SECRET_KEY", "x")
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=name):
        runpy.run_path(str(SETTINGS_FILE))


@pytest.mark.usefixtures("bare_env")
def test_django_sends_media_itself_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_KEY", "x")
    monkeypatch.delenv("MEDIA_SERVING", raising=False)
    assert runpy.run_path(str(SETTINGS_FILE))["MEDIA_SERVING"] == "django"
