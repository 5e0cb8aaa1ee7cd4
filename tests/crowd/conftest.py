"""Batches with submitted work, qualifications and a reviewer of another project for the
crowd tests (personas come from tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from annotation.models import Assignment, Batch
from annotation.services import assignment_submit, hit_claim
from core.models import Project, Role
from core.services import membership_add
from crowd.models import Qualification
from crowd.services import qualification_create
from curation.models import Split
from tests.annotation.factories import (
    CAPTION,
    captions_for,
    listened,
    make_clips,
    make_subset,
    publish,
)
from tests.conftest import make_user

MakeBatch = Callable[..., Batch]
Submit = Callable[..., Assignment]


@pytest.fixture
def make_batch(project: Project) -> MakeBatch:
    """make_batch(clips=3, captions_per_clip=2, …): a published batch on fresh clips."""

    def make(*, clips: int = 3, project: Project = project, **overrides: Any) -> Batch:
        subset = make_subset(project, make_clips(clips), Split.VAL)
        return publish(subset, **overrides)

    return make


@pytest.fixture
def batch(make_batch: MakeBatch) -> Batch:
    """Three clips, one per HIT, two captions each."""
    return make_batch()


@pytest.fixture
def submit() -> Submit:
    """submit(worker, text=…, now=…): the worker claims their next HIT and submits it."""

    def run(
        worker: Any, text: str = CAPTION, now: datetime | None = None, batch: Batch | None = None
    ) -> Assignment:
        assignment = hit_claim(worker=worker, batch=batch, now=now)
        assert assignment is not None, f"{worker} got no HIT"
        listened(assignment, now=now)
        return assignment_submit(
            assignment=assignment, worker=worker, captions=captions_for(assignment, text), now=now
        )

    return run


@pytest.fixture
def rex(olive: Any) -> Any:
    """A reviewer of Olive's "birds" project: a reviewer, but of another project."""
    user = make_user("rex")
    membership_add(project=Project.objects.get(slug="birds"), user=user, role=Role.REVIEWER)
    return user


@pytest.fixture
def qualification(project: Project, alice: Any) -> Qualification:
    subset = make_subset(project, make_clips(2))
    ids = " ".join(str(pk) for pk in subset.clips.values_list("pk", flat=True))
    return qualification_create(
        project=project, created_by=alice, name="Listening test", clip_ids=ids
    )
