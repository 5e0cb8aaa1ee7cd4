"""Production settings: `manage.py check --deploy` is clean, and DEBUG=0 serves HTTPS only
(redirect, HSTS, secure cookies) unless a plain-HTTP deployment says HTTPS=0."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
SECURITY = (
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_PROXY_SSL_HEADER",
)


def _production_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """This environment without any Earmark or Django setting, plus production's."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "SECURE_", "HTTPS", "DEBUG", "SECRET_KEY", "ALLOWED_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="earmark.settings",
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="earmark.example.org",
        CSRF_TRUSTED_ORIGINS="https://earmark.example.org",
        EARMARK_VAR_DIR=str(tmp_path / "var"),
    )
    env.update(overrides)
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _security_settings(env: dict[str, str]) -> dict[str, Any]:
    code = (
        "import django, json; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n) for n in {SECURITY!r}}}))"
    )
    done = _run(env, "-c", code)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_check_deploy_is_clean_with_production_settings(tmp_path: Path) -> None:
    done = _run(
        _production_env(tmp_path), "manage.py", "check", "--deploy", "--fail-level", "WARNING"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_production_redirects_to_https_sets_hsts_and_secures_cookies(tmp_path: Path) -> None:
    found = _security_settings(_production_env(tmp_path))
    assert found["SECURE_SSL_REDIRECT"] is True
    assert found["SECURE_HSTS_SECONDS"] >= 365 * 24 * 3600
    assert found["SESSION_COOKIE_SECURE"] is True
    assert found["CSRF_COOKIE_SECURE"] is True


def test_https_off_serves_a_plain_http_deployment(tmp_path: Path) -> None:
    found = _security_settings(_production_env(tmp_path, HTTPS="0"))
    assert found["SECURE_SSL_REDIRECT"] is False
    assert found["SECURE_HSTS_SECONDS"] == 0
    assert found["SESSION_COOKIE_SECURE"] is False


def test_the_development_server_of_bin_earmark_up_stays_on_plain_http(tmp_path: Path) -> None:
    found = _security_settings(_production_env(tmp_path, DEBUG="1"))  # what `up` exports
    assert found["SECURE_SSL_REDIRECT"] is False
    assert found["SESSION_COOKIE_SECURE"] is False


def test_the_proxy_header_names_what_a_tls_proxy_sets(tmp_path: Path) -> None:
    env = _production_env(tmp_path, SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto=https")
    assert _security_settings(env)["SECURE_PROXY_SSL_HEADER"] == [
        "HTTP_X_FORWARDED_PROTO",
        "https",
    ]


@pytest.fixture
def https_only(settings: Any) -> None:
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")


def test_a_plain_http_request_is_redirected_to_https(https_only: None, db: None) -> None:
    response = Client().get("/login/")
    assert response.status_code == 301
    assert response["Location"] == "https://testserver/login/"


def test_a_request_the_proxy_marks_https_is_served_with_hsts(https_only: None, db: None) -> None:
    response = Client().get("/login/", headers={"X-Forwarded-Proto": "https"})
    assert response.status_code == 200
    assert response["Strict-Transport-Security"].startswith("max-age=3600")


def test_health_probes_over_plain_http_are_not_redirected(https_only: None, db: None) -> None:
    assert Client().get("/healthz").status_code in (200, 503)
