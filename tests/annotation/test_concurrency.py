"""Many workers claiming and submitting at once, each thread on its own database connection.

Phase 1: a few workers accept a HIT and walk away, leaving it accepted; every other
worker loops hit_claim → assignment_submit until nothing is left, returning a HIT now and
then. Phase 2: the walked-away assignments pass their deadline; while a sweeper thread
expires them and a reviewer thread rejects some submitted work, all workers (walkers
included, whose own claim expires their late assignment too) claim again until no slot is
open. At the end every slot holds exactly one submitted caption per clip, no worker
captioned a clip twice, and each HIT's `taken` equals the assignments that hold its slots
(no double release).

PostgreSQL runs the acceptance size (200 clips, 5 captions each, 50 workers in phase 1,
55 in phase 2). SQLite runs a smaller crowd: it serialises writers (BEGIN IMMEDIATE), so
threads mostly wait their turn.
"""

from __future__ import annotations

import functools
import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models import Count, F, Q
from django.utils import timezone

from annotation.models import Assignment, Batch, Caption, Hit
from annotation.services import (
    assignment_return,
    assignment_review,
    assignment_submit,
    assignments_expire,
    hit_claim,
)
from core.models import Project, Role
from core.services import membership_add
from tests.annotation.factories import captions_for, listened, make_clips, make_subset, publish
from tests.conftest import make_user

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Crowd:
    clips: int
    captions: int
    workers: int
    walkers: int  # workers who accept a HIT, walk away and come back in phase 2
    rejections: int  # submitted assignments rejected in phase 2
    errors: list[str] = field(default_factory=list)
    swept: int = 0


def _thread(crowd: Crowd, body: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            body()
        except BaseException:
            crowd.errors.append(traceback.format_exc())
        finally:
            connections.close_all()  # this thread's connection; the test DB is dropped later

    return threading.Thread(target=run)


def _worker_loop(crowd: Crowd, worker: Any, batch: Batch, *, stop: threading.Event | None) -> None:
    rng = random.Random(worker.pk)
    claims = 0
    idle = 0.02
    while True:
        settled = stop is None or stop.is_set()  # read before claiming: see below
        assignment = hit_claim(worker=worker, batch=batch)
        if assignment is None:
            # Phase 2 slots re-open while workers run; only a claim that started after
            # the sweeper and reviewer finished may end the loop.
            if settled:
                return
            time.sleep(idle)
            idle = min(idle * 2, 0.4)  # back off: idle polling would starve the GIL
            continue
        idle = 0.02
        claims += 1
        if rng.random() < 0.05:
            assignment_return(assignment=assignment, worker=worker)
            continue
        text = f"worker {worker.pk} hears claim {claims} of a dog barking"
        assignment_submit(
            assignment=listened(assignment), worker=worker, captions=captions_for(assignment, text)
        )


def _run_crowd(project: Project, reviewer: Any, crowd: Crowd) -> Batch:
    subset = make_subset(project, make_clips(crowd.clips))
    batch = publish(subset, captions_per_clip=crowd.captions, clips_per_hit=1)
    rng = random.Random(7)
    for hit in batch.hits.all():  # spread priorities so ordering is exercised too
        Hit.objects.filter(pk=hit.pk).update(priority=rng.choice([0.0, 0.5, 1.0]))
    workers = []
    for i in range(crowd.workers):
        user = make_user(f"crowd{i:03d}")
        membership_add(project=project, user=user, role=Role.ANNOTATOR)
        workers.append(user)

    # Phase 1
    walkers, stayers = workers[: crowd.walkers], workers[crowd.walkers :]
    for walker in walkers:
        assert hit_claim(worker=walker, batch=batch) is not None
    threads = [
        _thread(crowd, functools.partial(_worker_loop, crowd, w, batch, stop=None)) for w in stayers
    ]
    _start_and_join(threads)
    assert not crowd.errors, crowd.errors[0]
    assert Assignment.objects.filter(state=Assignment.State.ACCEPTED).count() == crowd.walkers

    # Phase 2
    now = timezone.now()
    Assignment.objects.filter(state=Assignment.State.ACCEPTED).update(
        accepted_at=now - timedelta(hours=2), deadline=now - timedelta(hours=1)
    )
    submitted = list(
        Assignment.objects.filter(state=Assignment.State.SUBMITTED).values_list("pk", flat=True)
    )
    doomed = rng.sample(submitted, crowd.rejections)
    stop = threading.Event()

    def sweep() -> None:
        for _ in range(10):
            crowd.swept += assignments_expire()
            time.sleep(0.005)

    def review() -> None:
        for pk in doomed:
            assignment = Assignment.objects.select_related("hit__batch__project").get(pk=pk)
            assignment_review(assignment=assignment, reviewer=reviewer, approve=False)

    helpers = [_thread(crowd, sweep), _thread(crowd, review)]
    threads = [
        _thread(crowd, functools.partial(_worker_loop, crowd, w, batch, stop=stop)) for w in workers
    ]
    for thread in [*helpers, *threads]:
        thread.start()
    for thread in helpers:
        thread.join()
    stop.set()
    for thread in threads:
        thread.join()
    assert not crowd.errors, crowd.errors[0]
    return batch


def _start_and_join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _assert_exactly_filled(batch: Batch, crowd: Crowd) -> None:
    wanted = crowd.clips * crowd.captions
    held = Q(assignment__state__in=[Assignment.State.SUBMITTED, Assignment.State.APPROVED])
    captions = Caption.objects.filter(assignment__hit__batch=batch)
    assert captions.filter(held).count() == wanted
    assert captions.filter(assignment__state=Assignment.State.REJECTED).count() == crowd.rejections
    twice = captions.values("assignment__worker", "clip").annotate(n=Count("id")).filter(n__gt=1)
    assert list(twice) == []
    assert not Hit.objects.filter(taken__gt=F("max_assignments")).exists()
    holding = Count("assignments", filter=Q(assignments__state__in=Assignment.HOLDING))
    drift = batch.hits.annotate(holding=holding).exclude(taken=F("holding"))
    assert list(drift.values("pk", "taken", "holding")) == []
    assert set(batch.hits.values_list("taken", flat=True)) == {crowd.captions}
    assert not Assignment.objects.filter(state=Assignment.State.ACCEPTED).exists()
    assert Assignment.objects.filter(state=Assignment.State.EXPIRED).count() == crowd.walkers


def _summary(crowd: Crowd, seconds: float) -> str:
    states = dict(
        Assignment.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n")
    )
    return (
        f"\n{crowd.workers} workers, {crowd.clips} clips x {crowd.captions}: {seconds:.1f} s, "
        f"{sum(states.values())} assignments {states}, {crowd.swept} expired by the sweeper"
    )


def test_it_fills_1000_slots_exactly_with_50_plus_concurrent_workers_on_postgresql(
    project: Project, rey: Any
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(
            "row locks (SELECT … FOR UPDATE SKIP LOCKED) need PostgreSQL; SQLite serialises "
            "writers and runs the smaller crowd below. Set DATABASE_URL=postgres://… to run it."
        )
    crowd = Crowd(clips=200, captions=5, workers=55, walkers=5, rejections=40)
    started = time.monotonic()
    batch = _run_crowd(project, rey, crowd)
    print(_summary(crowd, time.monotonic() - started))  # shown with pytest -s
    _assert_exactly_filled(batch, crowd)


def test_it_fills_slots_exactly_with_a_small_concurrent_crowd(project: Project, rey: Any) -> None:
    crowd = Crowd(clips=30, captions=3, workers=10, walkers=3, rejections=6)
    batch = _run_crowd(project, rey, crowd)
    _assert_exactly_filled(batch, crowd)


def test_it_gives_one_worker_one_hit_however_many_tabs_claim_at_once(
    project: Project, ann: Any
) -> None:
    batch = publish(make_subset(project, make_clips(20)), captions_per_clip=1)
    crowd = Crowd(clips=20, captions=1, workers=1, walkers=0, rejections=0)
    claimed: list[int] = []
    barrier = threading.Barrier(8)

    def claim() -> None:
        barrier.wait()
        assignment = hit_claim(worker=ann, batch=batch)
        assert assignment is not None
        claimed.append(assignment.pk)

    _start_and_join([_thread(crowd, claim) for _ in range(8)])
    assert not crowd.errors, crowd.errors[0]
    assert len(set(claimed)) == 1
    assert sum(batch.hits.values_list("taken", flat=True)) == 1
