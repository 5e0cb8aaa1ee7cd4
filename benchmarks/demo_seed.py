"""How long the demo takes to seed, and how long the training it queues takes.

Usage: .venv/bin/python benchmarks/demo_seed.py [--threads 1]

On a fresh var dir: `manage.py migrate` (not timed), then `manage.py seed_demo` as
`bin/earmark up` runs it (timed: wall clock and CPU of it and its ffmpeg children), then the
jobs it queued for the gpu queue through `manage.py run_job`, one process each as the gpu
worker runs them (the retrain, then the suggestions it queues), with OMP_NUM_THREADS set
to --threads as `bin/earmark up` does without a GPU; then `seed_demo` again (nothing to do).
Each job's time is also read from its row (started → finished: without the process start).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children)."""
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, _children_cpu() - cpu


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the jobs")
    args = parser.parse_args()
    var = Path(tempfile.mkdtemp(prefix="earmark-bench-demo-"))
    env = {**os.environ, "EARMARK_VAR_DIR": str(var), "DEBUG": "1"}
    manage = [sys.executable, "manage.py"]
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}; var dir {var}")  # fmt: skip
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True)

    print(f"load average before seeding: {_load()}")
    wall, cpu = _timed([*manage, "seed_demo"], env)
    print(f"seed_demo, fresh:     {wall:6.1f} s wall, {cpu:6.1f} s CPU")

    os.environ.update({"EARMARK_VAR_DIR": str(var), "DEBUG": "1"})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "earmark.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from core.jobs import job_kind
    from core.models import Job

    jobs_env = {**env, "OMP_NUM_THREADS": str(args.threads)}
    print(f"load average before the jobs: {_load()}; OMP_NUM_THREADS={args.threads}")
    while True:
        queued = [
            job
            for job in Job.objects.filter(state=Job.State.QUEUED).order_by("pk")
            if job_kind(job.kind).queue == "gpu"
        ]
        if not queued:
            break
        job = queued[0]
        wall, cpu = _timed([*manage, "run_job", str(job.pk)], jobs_env)
        job.refresh_from_db()
        if job.started_at is None or job.finished_at is None:
            raise SystemExit(f"job #{job.pk} ({job.kind}) did not run: {job.state} {job.error}")
        in_job = (job.finished_at - job.started_at).total_seconds()
        print(f"{job.kind:15s} {job.state}: {wall:6.1f} s wall ({in_job:.1f} s in the job), "
              f"{cpu:6.1f} s CPU  {job.result}")  # fmt: skip
    print(f"load average after the jobs: {_load()}")

    wall, cpu = _timed([*manage, "seed_demo"], env)
    print(f"seed_demo, again:     {wall:6.1f} s wall, {cpu:6.1f} s CPU")


if __name__ == "__main__":
    main()
