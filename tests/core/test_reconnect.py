"""core.reconnect: database work done again on a fresh connection after the connection
broke, with backoff; never for bad data, never inside a transaction. (A real terminated
PostgreSQL backend: tests/reliability/test_connection_loss.py and test_training_faults.py.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import IntegrityError, InterfaceError, OperationalError, transaction

from core import reconnect


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(reconnect.time, "sleep", waits.append)
    return waits


def _failing(errors: list[Exception], calls: list[int]) -> Callable[[], str]:
    """Work that raises each of `errors` in turn, then succeeds."""

    def work() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return "done"

    return work


@pytest.mark.django_db(transaction=True)
def test_it_does_the_work_again_after_the_connection_broke(slept: list[float]) -> None:
    calls: list[int] = []
    errors: list[Exception] = [
        OperationalError("terminating connection due to administrator command"),
        InterfaceError("connection already closed"),
    ]

    assert reconnect.with_reconnect(_failing(errors, calls), what="test") == "done"

    assert len(calls) == 3
    assert slept == [0.5, 1.0]


@pytest.mark.django_db(transaction=True)
def test_it_gives_up_when_the_database_stays_away(slept: list[float]) -> None:
    calls: list[int] = []
    errors: list[Exception] = [OperationalError("the database system is shutting down")] * 9

    with pytest.raises(OperationalError):
        reconnect.with_reconnect(_failing(errors, calls), what="test")

    assert len(calls) == len(reconnect.BACKOFF) + 1
    assert slept == list(reconnect.BACKOFF)


@pytest.mark.django_db(transaction=True)
def test_it_never_retries_bad_data(slept: list[float]) -> None:
    calls: list[int] = []

    with pytest.raises(IntegrityError):
        reconnect.with_reconnect(_failing([IntegrityError("duplicate key")], calls), what="test")

    assert len(calls) == 1
    assert slept == []


@pytest.mark.django_db(transaction=True)
def test_it_never_retries_inside_a_transaction(slept: list[float]) -> None:
    calls: list[int] = []

    with pytest.raises(OperationalError), transaction.atomic():
        reconnect.with_reconnect(_failing([OperationalError("gone")], calls), what="test")

    assert len(calls) == 1
    assert slept == []


def _raised(make: Callable[[], None]) -> BaseException:
    with pytest.raises(Exception) as caught:  # noqa: PT011 (any: the test looks at its chain)
        make()
    return caught.value


def test_an_error_raised_from_a_lost_connection_counts_as_one() -> None:
    def step() -> None:
        try:
            raise OperationalError("server closed the connection unexpectedly")
        except OperationalError as lost:
            raise RuntimeError("the step failed") from lost

    assert reconnect.connection_lost(_raised(step))


def test_an_error_merely_raised_while_handling_one_does_not() -> None:
    def step() -> None:
        try:
            raise OperationalError("server closed the connection unexpectedly")
        except OperationalError:
            raise ValueError("bad input found while recovering")  # noqa: B904

    assert not reconnect.connection_lost(_raised(step))
