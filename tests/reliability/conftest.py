"""Fault injection into jobs and training runs (issue 23): every test here is marked
`reliability`; those that start processes are marked `worker` as well."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from core.jobs import JOB_KINDS
from tests.reliability.kinds import specs

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.reliability)


@pytest.fixture
def test_kinds(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Registers the test kinds (tests.reliability.kinds) on a queue, for one test."""

    def on(queue: str) -> None:
        for kind, spec in specs(queue).items():
            monkeypatch.setitem(JOB_KINDS, kind, spec)

    return on
