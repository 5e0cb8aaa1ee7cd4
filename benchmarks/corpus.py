"""Caption import and export throughput (issue 5, parts 6 and 7).

Usage: .venv/bin/python benchmarks/corpus.py
Set DATABASE_URL to benchmark PostgreSQL (a fresh database is best). Needs ../shared/data.

Imports AudioCaps v1 train (49,838 captions) fresh and again (idempotent), then exports the
50k captions as AudioCaps CSV, JSON lines and Clotho CSV snapshots (files, manifest, zip into
storage), and a 7.4k-caption export (val + test) to show memory does not grow with size.
CPU: this process's CPU time (SQLite runs in it; a PostgreSQL server's does not count).
Memory: the largest resident-set growth over the step (sampled every 20 ms from
/proc/self/statm), so the one-off cost of loading modules before the step is left out; RSS
reuses memory freed by the import, so each export is run once more under tracemalloc, whose
peak (Python allocations during the step, not timed) is the figure to compare across sizes.
"""

from __future__ import annotations

import functools
import os
import platform
import tracemalloc
from typing import Any

os.environ.setdefault("DEBUG", "0")  # DEBUG would log every query
os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key-benchmark-only-secret-key")

from _django import SHARED, setup
from _measure import measured


def main() -> None:
    setup()
    from django.conf import settings

    from core.models import Project
    from corpus.services import captions_import, snapshot_build, snapshot_create

    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"machine: {platform.machine()}, python {platform.python_version()}, database {db}")
    project = Project.objects.create(name="bench", slug="bench")
    train = SHARED / "audiocaps" / "train.csv"
    for label in ("fresh", "again"):
        record, elapsed, cpu, grew = measured(
            lambda: captions_import(project=project, path=train, fmt="audiocaps", split="train")
        )
        print(
            f"import AudioCaps train ({label}): {record.rows:,} rows in {elapsed:.2f} s = "
            f"{record.rows / elapsed:,.0f} captions/s (CPU {cpu:.2f} s), "
            f"{record.captions_created:,} created, RSS +{grew:.0f} MB"
        )
    for split in ("val", "test"):
        captions_import(
            project=project,
            path=SHARED / "audiocaps" / f"{split}.csv",
            fmt="audiocaps",
            split=split,
        )

    for fmt, splits in [
        ("audiocaps", ["train"]),
        ("jsonl", ["train"]),
        ("clotho", ["train"]),
        ("audiocaps", ["val", "test"]),
        ("jsonl", ["val", "test"]),
    ]:
        snapshot = snapshot_create(project=project, fmt=fmt, text="raw", splits=splits)
        built, elapsed, cpu, grew = measured(functools.partial(snapshot_build, snapshot=snapshot))
        captions = built.total_captions
        print(
            f"export {fmt:9} {'+'.join(splits):8}: {captions:,} captions in {elapsed:.2f} s = "
            f"{captions / elapsed:,.0f} captions/s (CPU {cpu:.2f} s), "
            f"archive {built.archive.size / 2**20:.1f} MB, RSS +{grew:.0f} MB, "
            f"traced peak {traced_peak(project, fmt, splits):.1f} MB"
        )


def traced_peak(project: Any, fmt: str, splits: list[str]) -> float:
    """Peak Python allocations (MB) while building one more snapshot of the same content."""
    from corpus.services import snapshot_build, snapshot_create

    snapshot = snapshot_create(project=project, fmt=fmt, text="raw", splits=splits)
    tracemalloc.start()
    snapshot_build(snapshot=snapshot)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


if __name__ == "__main__":
    main()
