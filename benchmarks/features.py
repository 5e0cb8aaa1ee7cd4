"""Feature extraction speed: WAV decoding + log-mel per ten-second clip, with and without
cache hits.

Usage: .venv/bin/python benchmarks/features.py [--clips 200] [--threads 1] [--processes 2]
       [--presets act,panns,vggish,ast]
Writes SynthScenes WAVs (32 kHz, 16-bit, 10 s) to a temporary folder first (not timed), then
prints clips/s for: batch extraction (`extract_files`), the cache's cold fill
(`FeatureCache.get_or_compute_many`: decode, extract, atomic .npy write), its warm reads (all
hits), one clip at a time through `get_or_compute` (cold and warm), and batch extraction
split over `--processes` processes of one torch thread each (how DataLoader workers run).
Target: >= 100 clips/s on 2 CPU cores for the ACT config including decoding.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


PROCESSES = 2


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(label: str, clips: int, work: Callable[[], object]) -> float:
    """Prints wall-clock clips/s and CPU ms per clip. On a busy machine the wall figure
    shrinks with the share of the cores this process gets; CPU time per clip does not, so
    2000 / (CPU ms per clip) estimates what two idle cores would do."""
    start, cpu = time.perf_counter(), _cpu()
    work()
    elapsed, used = time.perf_counter() - start, _cpu() - cpu
    print(
        f"  {label:<46} {clips / elapsed:7.1f} clips/s wall  {used * 1000 / clips:6.2f} CPU ms/clip"
        f"  (2 idle cores: ~{2 * clips / used:5.0f} clips/s)"
    )
    return clips / elapsed


def bench_preset(name: str, paths: list[Path], hashes: list[str], folder: Path) -> None:
    import torch

    from modeling.ml import features as F

    config = F.feature_preset(name)
    clips = len(paths)
    items: list[tuple[Path | str, str | None]] = list(zip(paths, hashes, strict=True))
    print(f"{name}: {config}")
    F.extract_files(paths[:2], config)  # warm-up: filterbanks, FFT plans

    def batched() -> None:
        for i in range(0, clips, 64):
            F.extract_files(paths[i : i + 64], config)

    cache = F.FeatureCache(folder / "cache", config)
    single = F.FeatureCache(folder / "cache-single", config)

    def one_by_one() -> None:
        for path, sha in items:
            single.get_or_compute(path, sha)

    def in_processes() -> None:
        chunks = [paths[i : i + 16] for i in range(0, clips, 16)]
        with ProcessPoolExecutor(
            PROCESSES, initializer=torch.set_num_threads, initargs=(1,)
        ) as pool:
            list(pool.map(F.extract_files, chunks, [config] * len(chunks)))

    timed("extract_files (decode + features, batched)", clips, batched)
    if PROCESSES > 1:
        timed(f"extract_files in {PROCESSES} processes x 1 thread", clips, in_processes)
    timed(
        "cache cold: get_or_compute_many (all misses)",
        clips,
        lambda: cache.get_or_compute_many(items),
    )
    timed(
        "cache warm: get_or_compute_many (all hits)",
        clips,
        lambda: cache.get_or_compute_many(items),
    )
    timed("one by one: get_or_compute, misses", clips, one_by_one)
    timed("one by one: get_or_compute, hits", clips, one_by_one)
    if (cache.hits, cache.misses, single.hits, single.misses) != (clips, clips, clips, clips):
        raise RuntimeError("the cache did not hit and miss as expected")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clips", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch threads in this process")
    parser.add_argument("--processes", type=int, default=2, help="for the multi-process row")
    parser.add_argument("--presets", default="act,panns,vggish,ast")
    args = parser.parse_args()

    import torch

    import synthscenes

    global PROCESSES
    PROCESSES = args.processes
    torch.set_num_threads(args.threads)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()},"
        f" torch {torch.__version__}, threads {torch.get_num_threads()},"
        f" load average {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="earmark-bench-features-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        paths, hashes = [], []
        # a few distinct scenes, copied: decoding and extraction cost the same for any audio
        distinct = [synthscenes.generate_scene(0, i, n_captions=1) for i in range(20)]
        for i in range(args.clips):
            scene = distinct[i % len(distinct)]
            path = synthscenes.write_wav(folder / f"clip{i:05d}.wav", scene.waveform, 32_000)
            paths.append(path)
            hashes.append(f"{i:064x}")
        print(f"wrote {args.clips} x 10 s WAVs in {time.perf_counter() - start:.1f} s (not timed)")

        for name in args.presets.split(","):
            bench_preset(name, paths, hashes, folder)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
