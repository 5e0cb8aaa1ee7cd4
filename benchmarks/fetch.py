"""Clip fetching throughput through real Celery media workers with 1, 2 and 4 processes.

Usage: .venv/bin/python benchmarks/fetch.py [--clips 24] [--processes 1 2 4] [--size 320x240]
Uses CELERY_BROKER_URL (filesystem broker by default; e.g. redis://127.0.0.1:6379/14) and
DATABASE_URL (fresh SQLite by default). yt-dlp fetches from a local HTTP server
(tests/curation/media_server.py) serving one generated 25 s MP4 under --clips YouTube ids;
each clip is its 10-20 s section: download + cut, 32 kHz WAV, 144p hint, peaks, storage.
FETCH_RATE_LIMIT_SECONDS is 0 here to measure the machine; in production the polite
default (1 s per process) caps each process at one download start per second.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _django import ROOT, setup


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clips", type=int, default=24)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--size", default="320x240", help="source video size")
    args = parser.parse_args()
    setup()

    media = Path(tempfile.mkdtemp(prefix="earmark-bench-media-"))
    try:
        _bench(args, media)
    finally:
        shutil.rmtree(media, ignore_errors=True)


def _bench(args: argparse.Namespace, media: Path) -> None:
    from django.conf import settings
    from django.db import transaction

    from core.models import Job, Project
    from core.services import job_enqueue
    from curation.models import Clip, Split, Subset, SubsetClip
    from tests.curation.media_server import Route, make_mp4, media_server

    source = make_mp4(media / "source.mp4", size=args.size)
    project, _ = Project.objects.get_or_create(slug="bench-fetch", defaults={"name": "Bench"})
    ids = [f"bench{i:06d}" for i in range(args.clips)]
    subset, _ = Subset.objects.get_or_create(
        project=project, slug="bench-fetch", defaults={"name": "Bench fetch"}
    )
    clips = []
    for youtube_id in ids:
        clip, _ = Clip.objects.get_or_create(
            source=Clip.Source.YOUTUBE,
            youtube_id=youtube_id,
            start_seconds=10,
            defaults={"end_seconds": 20},
        )
        clips.append(clip)
    SubsetClip.objects.filter(subset=subset).delete()
    SubsetClip.objects.bulk_create(
        [SubsetClip(subset=subset, clip=clip, split=Split.TRAIN) for clip in clips]
    )

    broker = settings.CELERY_BROKER_URL.split("://")[0]
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs ({_cpu()}), "
        f"python {platform.python_version()}, broker {broker}, database {db}, "
        f"{args.clips} clips of 10 s from a {args.size} 25 s MP4 on 127.0.0.1"
    )
    with media_server() as server:
        for youtube_id in ids:
            server.routes[youtube_id] = Route(path=source)
        for processes in args.processes:
            env = {
                **os.environ,
                "WORKER_HEARTBEAT_SECONDS": "1",
                "CLIP_SOURCE_URL_TEMPLATE": server.url_template,
                "FETCH_RATE_LIMIT_SECONDS": "0",
                "MEDIA_ROOT": str(media),
            }
            # CPU seconds the worker tree spends besides fetching: start-up and shutdown
            idle_cpu, _ = _with_worker(processes, env, lambda: None)

            def run() -> Any:
                with transaction.atomic():
                    job = job_enqueue(kind="clips_fetch", params={"subset_id": subset.pk})
                while not Job.objects.get(pk=job.pk).is_finished:
                    time.sleep(0.05)
                return Job.objects.get(pk=job.pk)

            Clip.objects.filter(pk__in=[c.pk for c in clips]).update(
                status=Clip.Status.PENDING, fetch_attempts=0, audio="", video="", error=""
            )
            cpu, job = _with_worker(processes, env, run)
            elapsed = job.finished_at.timestamp() - job.created_at.timestamp()
            ready = Clip.objects.filter(pk__in=[c.pk for c in clips], status="ready").count()
            print(
                f"{processes} process(es): {args.clips / elapsed:.2f} clips/s "
                f"({elapsed:.1f} s, {elapsed / args.clips * 1000:.0f} ms/clip wall, "
                f"{(cpu - idle_cpu) / args.clips:.2f} CPU s/clip), "
                f"job {job.state}, {ready}/{args.clips} ready, "
                f"load average {os.getloadavg()[0]:.1f}"
            )


def _with_worker(processes: int, env: dict[str, str], body: Callable[[], Any]) -> tuple[float, Any]:
    """Runs `body` while a media worker with `processes` processes is up; returns the CPU
    seconds the worker and everything it started used, and what `body` returned."""
    from core.models import WorkerHeartbeat
    from earmark.celery import app

    app.control.purge()
    WorkerHeartbeat.objects.all().delete()
    command = [sys.executable, "-m", "celery", "-A", "earmark", "worker", "-Q", "media"]
    command += ["-c", str(processes), "-n", f"bench{processes}@%h", "--without-mingle"]
    command += ["--without-gossip", "-l", "WARNING"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker = subprocess.Popen(command, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        while not WorkerHeartbeat.objects.exists():
            if time.monotonic() > deadline:
                raise SystemExit("worker did not start within 60 s")
            time.sleep(0.2)
        result = body()
    finally:
        worker.terminate()
        worker.wait(60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return cpu, result


if __name__ == "__main__":
    main()
