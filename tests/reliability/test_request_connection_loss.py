"""Failure 8: a web process's kept database connection dies between two requests (the
server restarted, its backend terminated, a proxy's idle timeout). With the connection
health checks (DATABASE_HEALTH_CHECKS, on by default) the next request notices and opens
a new one; without them it failed on the dead connection.

The requests go through Django's WSGI handler as under gunicorn, with its request_started
and request_finished signals, which manage kept connections; the test client mutes
those, so it cannot show this."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection

from core.services import api_token_create
from tests.reliability.kinds import terminate_own_connection

pytestmark = pytest.mark.django_db(transaction=True)


def _get(path: str, token: str) -> tuple[str, bytes]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        "wsgi.input": io.BytesIO(),
    }
    setup_testing_defaults(environ)
    statuses: list[str] = []

    def start_response(status: str, headers: Any, exc_info: Any = None) -> Callable[[bytes], Any]:
        statuses.append(status)
        return lambda data: None

    response = WSGIHandler()(environ, start_response)
    try:
        body = b"".join(response)
    finally:
        response.close()  # request_finished: Django decides whether to keep the connection
    return statuses[0], body


def test_a_request_after_its_process_lost_the_kept_connection_succeeds(alice: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(
            "SQLite keeps no connection between requests (CONN_MAX_AGE 0) and has no server "
            "to drop one; set DATABASE_URL=postgres://… to run it"
        )
    _, token = api_token_create(user=alice, name="script")
    status, _ = _get("/api/projects/", token)
    assert status.startswith("200")
    kept = connection.connection
    assert kept is not None  # kept for the next request (CONN_MAX_AGE)

    terminate_own_connection()  # pg_terminate_backend of the backend that request used

    status, body = _get("/api/projects/", token)
    assert status.startswith("200"), body
    assert connection.connection is not kept  # a new connection served it
