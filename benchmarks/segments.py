"""Segment import throughput and subset build time.

Usage: .venv/bin/python benchmarks/segments.py [--synthetic-rows 2000000]
Set DATABASE_URL to benchmark PostgreSQL (a fresh database is best). Needs ../shared/data.
Prints rows/s and the process's peak memory (max RSS) after each step.
"""

from __future__ import annotations

import argparse
import csv
import platform
import resource
import time
from pathlib import Path

import numpy as np
from _django import SHARED, setup


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_csv(path: Path, rows: int, label_ids: list[str], seed: int = 0) -> None:
    """AudioSet-shaped rows: unique 11-character ids, 1-4 labels (Zipf-like frequencies)."""
    rng = np.random.default_rng(seed)
    alphabet = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"))
    weights = 1 / np.arange(1, len(label_ids) + 1)
    weights /= weights.sum()
    with path.open("w", newline="") as handle:
        handle.write(
            "# synthetic\n# num_ytids\n# YTID, start_seconds, end_seconds, positive_labels\n"
        )
        writer = csv.writer(handle, quoting=csv.QUOTE_MINIMAL)
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            ids = ["".join(chars) for chars in rng.choice(alphabet, size=(n, 11))]
            counts = rng.integers(1, 5, size=n)
            for youtube_id, k in zip(ids, counts, strict=True):
                labels = rng.choice(len(label_ids), size=k, replace=False, p=weights)
                offset = int(rng.integers(0, 30)) * 10
                writer.writerow(
                    [
                        youtube_id,
                        f" {offset}.000",
                        f" {offset + 10}.000",
                        " " + ",".join(label_ids[i] for i in labels),
                    ]
                )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--synthetic-rows", type=int, default=2_000_000)
    args = parser.parse_args()
    var = setup()

    from django.conf import settings

    from core.models import Project
    from curation.services import ontology_import, recipe_save, segments_import, subset_build

    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"machine: {platform.machine()}, python {platform.python_version()}, database {db}")
    audioset = SHARED / "audioset"
    ontology_import(path=audioset / "ontology.json")

    start = time.perf_counter()
    rows = 0
    for name, segment_list in [
        ("balanced_train_segments.csv", "balanced"),
        ("eval_segments.csv", "eval"),
    ]:
        rows += segments_import(path=audioset / name, segment_list=segment_list)["rows"]
    elapsed = time.perf_counter() - start
    print(
        f"real balanced+eval: {rows:,} rows in {elapsed:.1f} s = {rows / elapsed:,.0f} rows/s, "
        f"peak {peak_mb():.0f} MB"
    )

    trainable = [row[1] for row in csv.reader((audioset / "class_labels_indices.csv").open())][1:]
    path = Path(var) / "synthetic.csv"
    synthetic_csv(path, args.synthetic_rows, trainable)
    start = time.perf_counter()
    result = segments_import(path=path, segment_list="unbalanced")
    elapsed = time.perf_counter() - start
    print(
        f"synthetic: {result['rows']:,} rows in {elapsed:.1f} s = "
        f"{result['rows'] / elapsed:,.0f} rows/s, peak {peak_mb():.0f} MB"
    )

    project = Project.objects.create(name="bench", slug="bench")
    recipe = recipe_save(
        project=project,
        name="AudioCaps-like",
        spec={
            "segment_lists": ["unbalanced"],
            "min_clips_per_label": 1000,
            "excluded_subtrees": ["Music"],
            "max_clips_per_label": 2000,
            "val_size": 500,
            "test_size": 1000,
            "seed": 0,
        },
    )
    start = time.perf_counter()
    subset = subset_build(recipe=recipe)
    elapsed = time.perf_counter() - start
    print(
        f"subset build over {subset.report['candidate_clips']:,} clips: {elapsed:.1f} s, "
        f"{subset.report['selected_clips']:,} selected, peak {peak_mb():.0f} MB"
    )


if __name__ == "__main__":
    main()
