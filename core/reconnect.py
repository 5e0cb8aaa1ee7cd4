"""Database work that outlives a dropped connection: a PostgreSQL restart, a terminated
backend or a proxy's idle timeout breaks the connection a long job holds, and Django does not
reconnect by itself outside a request (a connection whose query failed stays broken until
someone closes it). `with_reconnect` runs one piece of database work again on a fresh
connection, with backoff, so a training run or a job's bookkeeping rides the outage out.

What counts as the connection breaking is `connection_lost`: Django's OperationalError and
InterfaceError, the DB-API's classes for "the database went away" (psycopg raises them for
a terminated backend, a closed socket, a database starting up or shutting down). An
IntegrityError, a DataError or a ProgrammingError says the work itself is wrong, and doing
it again would give the same answer."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import Error, InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# seconds slept before each retry: 0.5 + 1 + 2 + 4 = 7.5 s for a database to come back
BACKOFF = (0.5, 1.0, 2.0, 4.0)


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised from (`raise … from`), is the database
    connection breaking. An error merely raised while one was being handled is not: its
    handler decided what it means."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (OperationalError, InterfaceError)):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


def with_reconnect(
    work: Callable[[], _T],
    *,
    what: str,
    retry_on: Callable[[Error], bool] = connection_lost,
) -> _T:
    """Runs `work`; when it fails with an error `retry_on` accepts, closes this thread's
    connection (Django opens a fresh one at the next query) and runs it again after each of
    BACKOFF's waits. `work` must be safe to run again: a write that failed with the
    connection was not committed. Inside a transaction nothing can be retried (the
    transaction died with the connection), so the error goes up at once."""
    for wait in (*BACKOFF, None):
        try:
            return work()
        except Error as exc:  # the DB-API's root: InterfaceError is no DatabaseError
            if wait is None or connection.in_atomic_block or not retry_on(exc):
                raise
            log.warning("%s failed (%s); retrying on a fresh connection in %g s", what, exc, wait)
            connection.close()
            time.sleep(wait)
    raise AssertionError("unreachable")  # the last attempt returned or raised
