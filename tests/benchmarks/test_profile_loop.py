"""benchmarks/profile_loop.py drives load_claim_submit.py's loop: the part that would rot
when that script changes (it did once: the loop became a function of the tokens)."""

from __future__ import annotations

import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

# the script imports its siblings (`from _deployment import …`) through its own folder
sys.path.append(str(Path(__file__).resolve().parents[2] / "benchmarks"))

import profile_loop
from load_claim_submit import Level


def test_each_level_runs_the_earmark_loop_of_the_seeded_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []

    async def run_level(
        base_url: str, loop: Any, workers: int, duration: float, meter: Any
    ) -> Level:
        seen.append(loop)
        return Level(workers=workers, loops=1, elapsed=duration, server_cpu=0.01, loop_ms=[5.0],
                     errors=Counter())  # fmt: skip

    monkeypatch.setattr(profile_loop, "_run_level", run_level)

    # in a thread of its own, as tests/benchmarks/asyncrun.py runs coroutines: the browser
    # tests' Playwright can leave an event loop running in the main thread
    with ThreadPoolExecutor(max_workers=1) as pool:
        level = pool.submit(
            profile_loop._loop_level, "http://127.0.0.1:1", ["token-a"], 1, 2.0, None
        ).result()

    assert level.workers == 1
    [loop] = seen
    assert callable(loop)
