"""Wall time, CPU time and resident-set growth of one benchmark step; a GPU's utilisation
sampled while a block runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

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


class GpuUtilisation:
    """Mean GPU utilisation (%) sampled every `interval` s by nvidia-smi while it runs;
    None where there is no nvidia-smi (or no CUDA device)."""

    def __init__(self, device: torch.device, interval: float = 0.5) -> None:
        self.index = device.index or 0
        self.interval = interval
        self.samples: list[float] = []
        self.enabled = device.type == "cuda" and shutil.which("nvidia-smi") is not None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        command = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                   "-i", str(self.index)]  # fmt: skip
        while not self._stop.wait(self.interval):
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode == 0 and done.stdout.strip():
                self.samples.append(float(done.stdout.split()[0]))

    def __enter__(self) -> GpuUtilisation:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._stop.set()
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None
