"""What the crowd gate (blocks + batch requirements) costs hit_claim.

Usage: DATABASE_URL=postgres://… .venv/bin/python benchmarks/claim_gate.py [--clips 5000]
       [--loops 600] [--workers 10] [--history 1000]
Single-threaded claim → submit loops on one batch (5 captions per clip), first with no
requirements, then with the AudioCaps gate on the batch (a qualification, ≥ 95 % approved,
≥ 1,000 approved) and every worker blocked on another project. Each worker has `history`
approved assignments, so the gate counts real rows. Prints claim latency and queries.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from datetime import timedelta

from _django import setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clips", type=int, default=5000)
    parser.add_argument("--loops", type=int, default=300)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--history", type=int, default=1000)
    args = parser.parse_args()
    setup()

    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from annotation.models import Assignment, Batch, Hit
    from annotation.services import (
        assignment_submit,
        batch_publish,
        clip_audio_served,
        hit_claim,
    )
    from core.models import Role
    from core.services import membership_add, project_create
    from crowd.models import BatchRequirements, Block, QualificationAttempt
    from crowd.services import batch_requirements_set, qualification_create
    from curation.models import Clip, Split, Subset, SubsetClip

    users = get_user_model().objects
    stamp = str(time.time_ns())[-8:]
    boss = users.create_user(f"boss{stamp}")
    project = project_create(name=f"Gate {stamp}", slug=f"gate-{stamp}", created_by=boss)
    other = project_create(name=f"Other {stamp}", slug=f"other-{stamp}", created_by=boss)

    def subset_of(n: int, name: str) -> Subset:
        clips = Clip.objects.bulk_create(
            Clip(
                source=Clip.Source.YOUTUBE,
                youtube_id=f"{stamp}{name[:1]}{i:07d}"[:20],
                start_seconds=Decimal(0),
                end_seconds=Decimal(10),
                status=Clip.Status.READY,
                audio="clips/audio/x.wav",
            )
            for i in range(n)
        )
        subset = Subset.objects.create(project=project, name=name, slug=f"{name}-{stamp}")
        SubsetClip.objects.bulk_create(
            (SubsetClip(subset=subset, clip=c, split=Split.VAL) for c in clips), batch_size=5000
        )
        return subset

    def publish(subset: Subset, per_clip: int) -> Batch:
        return batch_publish(
            subset=subset,
            split=Split.VAL,
            name=subset.name,
            captions_per_clip=per_clip,
            clips_per_hit=1,
            reward_cents=5,
            time_allotted=timedelta(hours=1),
            lifetime=timedelta(days=7),
            created_by=boss,
        )

    workers = [users.create_user(f"w{stamp}-{i}") for i in range(args.workers)]
    for w in workers:
        membership_add(project=project, user=w, role=Role.ANNOTATOR)
        membership_add(project=other, user=w, role=Role.ANNOTATOR)

    # each worker's approved history, on a batch of its own
    past = publish(subset_of(args.history, "history"), args.workers)
    past.move_to("finished")
    now = timezone.now()
    hit_ids = list(Hit.objects.filter(batch=past).values_list("pk", flat=True))
    Assignment.objects.bulk_create(
        (
            Assignment(
                hit_id=h,
                worker=w,
                state="approved",
                accepted_at=now - timedelta(days=9),
                deadline=now,
                submitted_at=now,
                reviewed_at=now,
            )
            for w in workers
            for h in hit_ids
        ),
        batch_size=5000,
    )
    batch = publish(subset_of(args.clips, "work"), 5)
    qual_subset = subset_of(2, "qual")
    qualification = qualification_create(
        project=project,
        created_by=boss,
        name=f"Q {stamp}",
        clip_ids=" ".join(str(c) for c in qual_subset.clips.values_list("pk", flat=True)),
    )
    QualificationAttempt.objects.bulk_create(
        QualificationAttempt(
            qualification=qualification, worker=w, state="approved", reviewed_at=now
        )
        for w in workers
    )

    def run(label: str) -> None:
        times: list[float] = []
        queries: list[int] = []
        counted = [0]

        def count(
            execute: Callable[..., object],
            sql: str,
            params: object,
            many: bool,
            context: dict[str, object],
        ) -> object:
            counted[0] += 1
            return execute(sql, params, many, context)

        for i in range(args.loops):
            worker = workers[i % len(workers)]
            counted[0] = 0
            with connection.execute_wrapper(count):
                t0 = time.perf_counter()
                assignment = hit_claim(worker=worker, batch=batch)
                times.append(time.perf_counter() - t0)
            queries.append(counted[0])
            assert assignment is not None, "ran out of HITs"
            captions = {
                c: "a dog barks while cars pass by"
                for c in assignment.hit.hit_clips.values_list("clip_id", flat=True)
            }
            for hit_clip in assignment.hit.hit_clips.select_related("clip"):
                # as the worker's player would have, long enough ago to have played through
                clip_audio_served(
                    assignment=assignment,
                    clip=hit_clip.clip,
                    now=timezone.now() - timedelta(hours=1),
                )
            assignment_submit(assignment=assignment, worker=worker, captions=captions)
        ms = sorted(t * 1000 for t in times)
        p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
        print(
            f"| {label} | {statistics.mean(ms):.2f} | {p(0.5):.2f} | {p(0.95):.2f} | "
            f"{p(0.99):.2f} | {statistics.mean(queries):.0f} |"
        )

    print(
        f"{platform.machine()} {platform.python_version()} {connection.vendor}; "
        f"{args.clips:,} clips x 5 captions, {args.workers} workers x {args.history:,} "
        f"approved, {args.loops} claim → submit loops per row"
    )
    print("| gate | mean ms | p50 ms | p95 ms | p99 ms | queries/claim |")
    print("|---|---|---|---|---|---|")
    gated = "qualification + ≥ 95 % + ≥ history approved, blocked elsewhere"
    # interleaved, so a busy machine (other work on the same cores) weighs on both alike
    for _ in range(2):
        BatchRequirements.objects.filter(batch=batch).delete()
        Block.objects.filter(project=other).delete()
        run("no requirements, no blocks")
        batch_requirements_set(
            batch=batch,
            by=boss,
            qualifications=[qualification],
            min_approval_percent=95,
            min_approved=args.history,
        )
        for w in workers:
            Block.objects.create(project=other, worker=w, reason="benchmark", blocked_by=boss)
        run(gated)


if __name__ == "__main__":
    main()
