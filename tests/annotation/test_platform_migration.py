"""annotation 0011: the ids of MTurk rows move from the mturk_* columns into PlatformRef,
every one kept, and batches on MTurk say so in Batch.platform."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from annotation.models import Batch, Platform, PlatformRef

BEFORE = [
    ("annotation", "0010_batch_reward_per_clip"),
    ("crowd", "0003_locales_and_mturk_qualifications"),
]
SENT = timezone.now() - timedelta(days=1)


def _migrate(to: list[tuple[str, str]] | None = None) -> Any:
    executor = MigrationExecutor(connection)
    targets = to or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _rows(apps: Any) -> dict[str, int]:
    """An MTurk batch with a HIT, a reviewed assignment whose review went out, a test made
    an MTurk qualification type and a graded attempt from a request; and a local batch."""
    model = apps.get_model
    user = model("auth", "User").objects.create(username="alice")
    project = model("core", "Project").objects.create(name="p", slug="p", created_by=user)
    subset = model("curation", "Subset").objects.create(project=project, name="s", slug="s")
    now = timezone.now()

    def batch(name: str, hit_type: str) -> Any:
        return model("annotation", "Batch").objects.create(
            project=project, subset=subset, split="train", name=name, captions_per_clip=1,
            clips_per_hit=1, reward_cents=1, time_allotted=timedelta(minutes=5),
            lifetime=timedelta(days=1), created_by=user, mturk_hit_type_id=hit_type,
        )  # fmt: skip

    on_mturk, local = batch("on mturk", "TYPE1"), batch("local", "")
    hit = model("annotation", "Hit").objects.create(
        batch=on_mturk, max_assignments=1, taken=1, mturk_hit_id="HIT1"
    )
    model("annotation", "Hit").objects.create(batch=local, max_assignments=1)
    assignment = model("annotation", "Assignment").objects.create(
        hit=hit, worker=user, state="approved", accepted_at=now - timedelta(hours=1),
        deadline=now, submitted_at=now, reviewed_at=now, mturk_assignment_id="ASSIGN1",
        mturk_review_sent_at=SENT,
    )  # fmt: skip
    test = model("crowd", "Qualification").objects.create(
        project=project, name="test", mturk_qualification_type_id="QTYPE1"
    )
    attempt = model("crowd", "QualificationAttempt").objects.create(
        qualification=test, worker=user, state="approved", submitted_at=now, reviewed_at=now,
        mturk_request_id="QREQ1", mturk_decision_sent_at=None,
    )  # fmt: skip
    return {
        "on_mturk": on_mturk.pk,
        "local": local.pk,
        "hit": hit.pk,
        "assignment": assignment.pk,
        "test": test.pk,
        "attempt": attempt.pk,
    }


@pytest.fixture(scope="module")
def made(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, int]]:
    with django_db_blocker.unblock():
        try:
            made = _rows(_migrate(BEFORE))
            _migrate()
            yield made
        finally:
            _migrate()
            call_command("flush", interactive=False, verbosity=0)


pytestmark = pytest.mark.django_db


def test_it_keeps_every_mturk_id(made: dict[str, int]) -> None:
    kept = set(PlatformRef.objects.values_list("platform", "kind", "local_id", "external_id"))
    assert kept == {
        ("mturk", "batch", made["on_mturk"], "TYPE1"),
        ("mturk", "hit", made["hit"], "HIT1"),
        ("mturk", "assignment", made["assignment"], "ASSIGN1"),
        ("mturk", "qualification", made["test"], "QTYPE1"),
        ("mturk", "attempt", made["attempt"], "QREQ1"),
    }


def test_it_keeps_when_decisions_reached_mturk(made: dict[str, int]) -> None:
    sent = dict(PlatformRef.objects.values_list("kind", "reported_at"))
    assert sent["assignment"] == SENT
    assert sent["attempt"] is None  # the grade still goes out on the next sync


def test_a_batch_with_a_hit_type_is_on_mturk_and_the_others_local(made: dict[str, int]) -> None:
    assert Batch.objects.get(pk=made["on_mturk"]).platform == Platform.MTURK
    assert Batch.objects.get(pk=made["local"]).platform == Platform.LOCAL


# outside a transaction (SQLite alters tables only there); the last test of the module, as
# a transactional test empties the tables after it
@pytest.mark.django_db(transaction=True)
def test_migrating_back_puts_every_id_back_in_its_column(made: dict[str, int]) -> None:
    apps = _migrate(BEFORE)
    try:
        model = apps.get_model
        assert model("annotation", "Batch").objects.get(pk=made["on_mturk"]).mturk_hit_type_id == (
            "TYPE1"
        )
        assert model("annotation", "Hit").objects.get(pk=made["hit"]).mturk_hit_id == "HIT1"
        assignment = model("annotation", "Assignment").objects.get(pk=made["assignment"])
        assert (assignment.mturk_assignment_id, assignment.mturk_review_sent_at) == (
            "ASSIGN1",
            SENT,
        )
        test = model("crowd", "Qualification").objects.get(pk=made["test"])
        assert test.mturk_qualification_type_id == "QTYPE1"
        attempt = model("crowd", "QualificationAttempt").objects.get(pk=made["attempt"])
        assert attempt.mturk_request_id == "QREQ1"
    finally:
        _migrate()
