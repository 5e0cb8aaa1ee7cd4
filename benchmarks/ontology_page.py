"""What the ontology page costs with its cached clip counts (LabelSourceCount), against the
GROUP BY over every clip-label link it ran per request before.

Usage: .venv/bin/python benchmarks/ontology_page.py [--synthetic-rows 300000] [--renders 20]
Uses DATABASE_URL (fresh SQLite by default; on PostgreSQL point it at an empty database).
Loads the full ontology from the test fixtures, the real balanced and eval lists when
../shared/data has them, and synthetic unbalanced rows (1-4 labels, Zipf-like).
"""

from __future__ import annotations

import argparse
import csv
import platform
import statistics
import time
from collections import defaultdict
from pathlib import Path

from _django import ROOT, SHARED, setup
from segments import synthetic_csv


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(0.95 * (len(values) - 1))]
    return (
        f"mean {statistics.mean(values):8.1f}  p50 {statistics.median(values):8.1f}  p95 {p95:8.1f}"
    )


def grouped_counts() -> dict[int, dict[str, int]]:
    """The page's counts as computed per request before the cache (queries.py before it)."""
    from django.db.models import Count

    from curation.models import Clip

    counts: dict[int, dict[str, int]] = defaultdict(dict)
    rows = (
        Clip.labels.through.objects.values("label_id", "clip__segment_list")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for row in rows:
        counts[row["label_id"]][row["clip__segment_list"] or "local"] = row["n"]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--synthetic-rows", type=int, default=300_000)
    parser.add_argument("--renders", type=int, default=20)
    args = parser.parse_args()
    var = setup()

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from core.services import project_create
    from curation import queries
    from curation.models import Clip, Label
    from curation.services import label_counts_refresh, ontology_import, segments_import

    settings.ALLOWED_HOSTS = ["*"]
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"machine: {platform.machine()}, python {platform.python_version()}, database {db}")
    ontology_import(path=ROOT / "tests" / "fixtures" / "audioset_ontology.json")
    audioset = SHARED / "audioset"
    for name, segment_list in [
        ("balanced_train_segments.csv", "balanced"),
        ("eval_segments.csv", "eval"),
    ]:
        if (audioset / name).is_file():
            segments_import(path=audioset / name, segment_list=segment_list)
    if (audioset / "class_labels_indices.csv").is_file():
        rows = list(csv.reader((audioset / "class_labels_indices.csv").open()))[1:]
        trainable = [row[1] for row in rows]
    else:
        trainable = list(Label.objects.filter(abstract=False).values_list("mid", flat=True))
    path = Path(var) / "synthetic.csv"
    synthetic_csv(path, args.synthetic_rows, trainable)
    start = time.perf_counter()
    segments_import(path=path, segment_list="unbalanced")
    print(f"synthetic import of {args.synthetic_rows:,} rows: {time.perf_counter() - start:.1f} s")
    links = Clip.labels.through.objects.count()
    n_clips, n_labels = Clip.objects.count(), Label.objects.count()
    print(f"{n_clips:,} clips, {links:,} clip-label links, {n_labels} labels")

    refresh = []
    for _ in range(3):
        start = time.perf_counter()
        with transaction.atomic():
            written = label_counts_refresh()
        refresh.append((time.perf_counter() - start) * 1000)
    print(f"label_counts_refresh (all labels, {written} rows), ms: {ms(refresh)}")
    assert queries.label_clip_counts() == grouped_counts(), "cache differs from the links"

    user = get_user_model().objects.create_user(username="bench", password="x")
    project = project_create(name="Bench", slug="bench", created_by=user)
    client = Client()
    client.force_login(user)
    url = reverse("ontology", args=[project.slug])

    def render(label: str) -> None:
        times, counts = [], []
        client.get(url)  # warm caches, templates
        for _ in range(args.renders):
            with CaptureQueriesContext(connection) as captured:
                start = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200
            counts.append(len(captured.captured_queries))
        print(f"ontology page, {label}: {max(counts)} queries, ms: {ms(times)}")

    render("cached counts")
    cached = queries.label_clip_counts
    queries.label_clip_counts = grouped_counts  # the page as it was before the cache
    try:
        render("GROUP BY per request (before)")
    finally:
        queries.label_clip_counts = cached

    for name, fn in [("cache read", cached), ("GROUP BY over links", grouped_counts)]:
        times = []
        for _ in range(args.renders):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
        print(f"counts alone, {name}, ms: {ms(times)}")


if __name__ == "__main__":
    main()
