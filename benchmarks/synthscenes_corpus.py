"""How fast the SynthScenes corpus of reproduce.py / train_synthscenes.py is built, and what it
holds: scenes/s, the parent's peak RSS, the workers' largest peak, and the bytes a clip's
features take per front end (and its video), for the front ends the given models read as
reproduce.py plans them.

Usage: .venv/bin/python benchmarks/synthscenes_corpus.py [--train 2000] [--val 200]
       [--test 200] [--models nn,lstm,act] [--frames-per-second 10 | 0] [--preset small]
       [--workers N] [--chunk-size 16] [--video-fps 2] [--video-size 24]

Run it once per worker count (each run a fresh process, so that peak RSS is this run's);
`--workers 1` is the serial path: the parent generates the scenes with its own torch threads.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks import captioning, reproduce
from benchmarks._measure import rss


class WorkerPeak:
    """The largest VmHWM (peak RSS since exec) of this process's children, read from /proc
    every `interval` s while it runs: a spawned child's ru_maxrss would count the parent's
    pages it shared between fork and exec."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _children(self) -> list[str]:
        parent = str(os.getpid())
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            # the fields after the command name (which may hold spaces): state, ppid, ...
            if stat.rsplit(")", 1)[1].split()[1] == parent:
                found.append(entry)
        return found

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            for pid in self._children():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.kib = max(self.kib, int(line.split()[1]))

    def __enter__(self) -> WorkerPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--val", type=int, default=200)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--models", default="nn,lstm,act")
    parser.add_argument(
        "--frames-per-second", type=float, default=10.0, help="0: each recipe's own front end"
    )
    parser.add_argument("--preset", default="small")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chunk-size", type=int, default=16)
    parser.add_argument("--video-fps", type=float, default=2.0)
    parser.add_argument("--video-size", type=int, default=24)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = sorted(set(names) - set(reproduce.ALL_MODELS))
    if unknown:
        raise SystemExit(f"--models: unknown {', '.join(unknown)}")
    reproduce._django()
    from modeling.ml.registry import uses_video

    configs = [
        reproduce.plan(
            name, preset=args.preset, epochs=None,
            frames_per_second=args.frames_per_second or None,
            device="cpu", video_fps=args.video_fps, video_size=args.video_size,
        )[1]
        for name in names
    ]  # fmt: skip
    video = None
    if any(uses_video(n) for n in names):
        video = captioning.VideoSpec(fps=args.video_fps, size=args.video_size)
    load_before = os.getloadavg()[0]
    rss_before = rss() / 2**20
    cpu_before = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN)
    with WorkerPeak() as workers:
        corpus = captioning.generate_corpus(
            args.train, args.val, args.test, feature_configs=configs, video=video,
            workers=args.workers, chunk_size=args.chunk_size,
        )  # fmt: skip
    clips = args.train + args.val + args.test
    # the workers have exited (and been waited for): their CPU time is in RUSAGE_CHILDREN
    cpu = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_before
    parent_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, parent torch threads "
        f"{torch.get_num_threads()}, load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after"
    )
    print(
        f"{clips} clips ({args.train}/{args.val}/{args.test}), {args.workers} worker(s), "
        f"chunks of {args.chunk_size}: {corpus.seconds:.1f} s, {clips / corpus.seconds:.1f} "
        f"scenes/s, {cpu / clips * 1000:.0f} ms of CPU a scene (parent and workers); "
        f"parent RSS {rss_before:.0f} MB before, peak {parent_peak:.0f} MB"
        + (f"; largest worker peak {workers.kib / 1024:.0f} MB" if workers.kib else "")
    )
    kept = 0
    for config in {captioning.FeatureStore.key(c): c for c in configs}.values():
        per_split = corpus.features.get(config)
        size = sum(f.numel() * f.element_size() for fs in per_split.values() for f in fs)
        kept += size
        print(
            f"features {config.kind} {config.n_features} bins at {config.frames_per_second:g} "
            f"frames/s: {size / clips / 1024:.1f} KiB a clip, {size / 2**20:.0f} MB in all"
        )
    if corpus.videos is not None:
        size = sum(v.numel() * v.element_size() for vs in corpus.videos.values() for v in vs)
        kept += size
        print(f"video (float pixels): {size / clips / 1024:.1f} KiB a clip")
    print(f"kept: {kept / clips / 1024:.1f} KiB a clip, {kept / 2**20:.0f} MB in all")


if __name__ == "__main__":
    main()
