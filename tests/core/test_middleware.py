"""A view that loses the database answers 503 with Retry-After (core.middleware): an HTML
page on the site, a JSON message on the API, with DEBUG on or off; other errors stay 500s."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import IntegrityError, InterfaceError, OperationalError, connection

from core.middleware import RETRY_AFTER_SECONDS
from tests.conftest import login

pytestmark = pytest.mark.django_db


@contextmanager
def failing_queries(table: str, error: Exception) -> Iterator[None]:
    """Every query on `table` raises `error`, as the driver raises it when the server went
    away mid-request; other queries (the session, the user) pass."""

    def refuse(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if table in sql:
            raise error
        return execute(sql, *args)

    with connection.execute_wrapper(refuse):
        yield


LOST = OperationalError("server closed the connection unexpectedly")


@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
@pytest.mark.parametrize(
    "error",
    [LOST, InterfaceError("connection already closed")],
    ids=["OperationalError", "InterfaceError"],
)
def test_a_page_that_loses_the_database_answers_503_with_retry_after(
    settings: Any, alice: Any, debug: bool, error: Exception
) -> None:
    settings.DEBUG = debug
    client = login(alice)
    with failing_queries("core_membership", error):
        response = client.get("/")  # the home page lists the user's memberships
    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert "The database is not answering right now" in html
    assert "Traceback" not in html


@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
def test_an_api_call_that_loses_the_database_answers_503_json_with_retry_after(
    settings: Any, alice: Any, debug: bool
) -> None:
    settings.DEBUG = debug
    client = login(alice)
    with failing_queries("core_membership", LOST):
        response = client.get("/api/projects/")
    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response.json() == {
        "detail": "The database is not answering right now. Try again in a moment."
    }


def test_other_database_errors_are_not_taken_for_an_outage(alice: Any) -> None:
    client = login(alice)
    with (
        failing_queries("core_membership", IntegrityError("duplicate key")),
        pytest.raises(IntegrityError),  # the test client re-raises what a 500 would hide
    ):
        client.get("/")
