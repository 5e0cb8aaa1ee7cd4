"""With proxies in front (TRUSTED_PROXY_COUNT > 0) the web process must not listen where a
client reaches it directly: `check --deploy` and gunicorn's start say so (core.checks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.checks import bind_problem, proxy_bind_check

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "address",
    ["0.0.0.0:8000", "[::]:8000", "93.184.216.34:8000", ":8000", "earmark.example.org:80"],
)
def test_it_flags_an_address_clients_reach_with_proxies(address: str) -> None:
    assert bind_problem(address, 1) is not None


@pytest.mark.parametrize(
    "address", ["127.0.0.1:8000", "[::1]:8000", "unix:/run/earmark.sock", "10.0.0.5:8000",
                "localhost:8000"],
)  # fmt: skip
def test_it_accepts_a_socket_loopback_or_private_address(address: str) -> None:
    assert bind_problem(address, 1) is None


def test_without_proxies_any_bind_is_fine() -> None:
    assert bind_problem("0.0.0.0:8000", 0) is None


def test_check_deploy_reports_a_public_bind_behind_proxies(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT, settings.WEB_BIND = 1, "0.0.0.0:8000"
    [error] = proxy_bind_check(None)
    assert error.id == "earmark.E001"
    assert "TRUSTED_PROXY_COUNT=1" in error.msg
    settings.WEB_BIND = "127.0.0.1:8000"
    assert proxy_bind_check(None) == []


def test_gunicorn_refuses_to_start_on_a_public_bind_behind_proxies(tmp_path: Path) -> None:
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "earmark.settings_test",
        "EARMARK_VAR_DIR": str(tmp_path),
        "TRUSTED_PROXY_COUNT": "1",
    }
    done = subprocess.run(
        [gunicorn, "-c", "python:earmark.gunicorn_conf", "-b", "0.0.0.0:0", "earmark.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "binds 0.0.0.0:0 listens on every interface" in done.stderr
