"""Wall time, CPU time and resident-set growth of one benchmark step."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    """This process's resident set in bytes (from /proc/self/statm)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * PAGE


def measured(step: Callable[[], Any]) -> tuple[Any, float, float, float]:
    """(result, wall seconds, this process's CPU seconds, largest RSS growth in MB), the RSS
    sampled every 20 ms while the step runs."""
    base = rss()
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start, cpu = time.perf_counter(), time.process_time()
    result = step()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    done.set()
    sampler.join()
    return result, elapsed, cpu, (max(peak[0], rss()) - base) / 2**20
