"""What the HIT page costs: server render, queries, bytes sent, the caption rules on both
sides, and the claim with reported clips excluded.

Usage: .venv/bin/python benchmarks/hit_page.py [--clips 5000] [--renders 60] [--no-browser]
Uses DATABASE_URL (fresh SQLite by default; on PostgreSQL point it at an empty database).
The browser half (rules in Chromium) needs /usr/bin/chromium and Playwright.
"""

from __future__ import annotations

import argparse
import gzip
import platform
import random
import statistics
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from _django import ROOT, setup

WORDS = ["dog", "car", "man", "woman", "bird", "engine", "rain", "door", "child", "crowd"]
VERBS = ["barks", "passes", "speaks", "laughs", "chirps", "idles", "falls", "slams", "cries"]
HOW = ["loudly", "in the distance", "repeatedly", "softly", "", "quickly", "nearby"]


def captions(n: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(n):
        a, b = rng.sample(WORDS, 2)
        text = f"a {a} {rng.choice(VERBS)} {rng.choice(HOW)} while a {b} {rng.choice(VERBS)}"
        if rng.random() < 0.2:
            text = "There is " + text
        out.append(" ".join(text.split()))
    return out


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(0.95 * (len(values) - 1))]
    mean, p50 = statistics.mean(values), statistics.median(values)
    return f"mean {mean:7.2f}  p50 {p50:7.2f}  p95 {p95:7.2f}"


def kib(data: bytes) -> str:
    return f"{len(data) / 1024:.1f} KiB ({len(gzip.compress(data)) / 1024:.1f} KiB gzipped)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clips", type=int, default=5000)
    parser.add_argument("--renders", type=int, default=60)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    setup()

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from annotation import rules
    from annotation.models import ClipReport
    from annotation.services import assignment_return, batch_publish, hit_claim
    from core.models import Role
    from core.services import membership_add, project_create
    from curation.models import Clip, Label, Split, Subset, SubsetClip, WordLabel

    rng = random.Random(7)
    print(f"# HIT page benchmark on {platform.machine()}, Python {platform.python_version()}, "
          f"{connection.vendor}, {args.clips:,} clips")  # fmt: skip

    users = get_user_model().objects
    alice = users.create_user("bench-alice", password="x")
    ann = users.create_user("bench-ann", password="x")
    project = project_create(name="Bench", slug="bench", created_by=alice)
    membership_add(project=project, user=ann, role=Role.ANNOTATOR)
    word = WordLabel.objects.create(name="dog", super_category="animal")
    labels = [
        Label.objects.create(
            mid=f"/m/b{i}",
            name=f"Label {i}",
            description="x " * 60,
            word_label=word if i % 2 else None,
        )
        for i in range(20)
    ]
    peaks = [round(rng.random(), 3) for _ in range(400)]
    clips = Clip.objects.bulk_create(
        Clip(
            source=Clip.Source.YOUTUBE, youtube_id=f"bench{i:06d}", start_seconds=Decimal(0),
            end_seconds=Decimal(10), status=Clip.Status.READY, audio="clips/audio/x.wav",
            video="clips/video/x.mp4", peaks=peaks, duration_seconds=10.0,
        )
        for i in range(args.clips)
    )  # fmt: skip
    Clip.labels.through.objects.bulk_create(
        Clip.labels.through(clip_id=c.pk, label_id=labels[(c.pk + k) % 20].pk)
        for c in clips
        for k in (0, 7, 13)
    )
    for per_hit in (1, 5):
        subset = Subset.objects.create(project=project, name=f"S{per_hit}", slug=f"s{per_hit}")
        SubsetClip.objects.bulk_create(
            SubsetClip(subset=subset, clip=c, split=Split.VAL) for c in clips
        )

    # 1. server render of the HIT page
    client = Client(HTTP_HOST="localhost")
    client.force_login(ann)
    for per_hit in (1, 5):
        batch = batch_publish(
            subset=Subset.objects.get(slug=f"s{per_hit}"), split=Split.VAL, name=f"b{per_hit}",
            clips_per_hit=per_hit, reward_cents=10, time_allotted=timedelta(hours=1),
            lifetime=timedelta(days=1), created_by=alice, captions_per_clip=5,
        )  # fmt: skip
        assignment = hit_claim(worker=ann, batch=batch)
        assert assignment is not None
        url = reverse("assignment_detail", args=[assignment.pk])
        client.get(url)  # warm templates
        times = []
        for _ in range(args.renders):
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        html = response.content
        print(
            f"render, {per_hit} clip(s)/HIT: {ms(times)} ms; "
            f"{len(queries)} queries; HTML {kib(html)}"
        )
        assignment_return(assignment=assignment, worker=ann)
        batch.move_to("finished")

    for name in ("hit.js", "caption_rules.js", "hit.css"):
        data = (ROOT / "static" / name).read_bytes()
        print(f"static {name}: {kib(data)}")

    # 2. the rules in Python
    limits = rules.Limits(min_words=3, max_words=40, max_chars=500)
    texts = captions(5000, rng)
    started = time.perf_counter()
    for text in texts:
        rules.check(text, limits)
    per = (time.perf_counter() - started) / len(texts) * 1e6
    print(f"rules.check in Python: {per:.1f} µs per caption ({len(texts):,} captions)")

    # 3. the claim: a worker with no reports against one with 50 reports on random clips
    # (a heavy reporter; the clips are spread over the queue, as broken clips would be),
    # interleaved so both meet the same machine load
    batch = batch_publish(
        subset=Subset.objects.get(slug="s1"), split=Split.VAL, name="claims", clips_per_hit=1,
        reward_cents=10, time_allotted=timedelta(hours=1), lifetime=timedelta(days=1),
        created_by=alice, captions_per_clip=5,
    )  # fmt: skip
    abe = users.create_user("bench-abe", password="x")
    membership_add(project=project, user=abe, role=Role.ANNOTATOR)
    ClipReport.objects.bulk_create(
        ClipReport(assignment=assignment, worker=abe, clip=clip, problem="audio_broken")
        for clip in rng.sample(clips, 50)
    )
    claim_times: dict[str, list[float]] = {"no reports": [], "50 reports": []}
    for _ in range(args.renders):
        for label, worker in (("no reports", ann), ("50 reports", abe)):
            started = time.perf_counter()
            claimed = hit_claim(worker=worker, batch=batch)
            claim_times[label].append((time.perf_counter() - started) * 1000)
            assert claimed is not None
            assignment_return(assignment=claimed, worker=worker)
    for label, values in claim_times.items():
        print(f"hit_claim, worker with {label}: {ms(values)} ms")

    # 4. the rules in Chromium, as the page runs them on each keystroke
    if not args.no_browser and Path("/usr/bin/chromium").exists():
        import json

        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
            )
            page = browser.new_page()
            page.set_content("<!doctype html><title>rules</title>")
            page.add_script_tag(path=str(ROOT / "static" / "caption_rules.js"))
            per_js = page.evaluate(
                """([table, texts]) => {
                    EarmarkCaptionRules.check("warm up", table);
                    const t0 = performance.now();
                    for (const t of texts) EarmarkCaptionRules.check(t, table);
                    return (performance.now() - t0) / texts.length * 1000;
                }""",
                [json.loads(json.dumps(rules.table(limits))), texts],
            )
            browser.close()
        print(f"caption rules in Chromium: {per_js:.1f} µs per caption (one keystroke's check)")


if __name__ == "__main__":
    main()
