"""Queries a worker's claim → submit loop costs through the API, as a script makes them
(bearer token): a query added to the hot path fails here before it shows in
benchmarks/load_claim_submit.py. Counted inside the test's transaction, so atomic blocks
show as SAVEPOINT / RELEASE pairs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from annotation.models import Assignment, Batch
from core.services import api_token_create
from crowd.services import batch_requirements_set, qualification_create
from tests.annotation.factories import CAPTION, MakeBatch, listened, make_clips, make_subset

# token, savepoint pair, current assignment, claim SELECT … SKIP LOCKED, slot UPDATE …
# RETURNING the HIT, its batch, assignment INSERT; then the answer's clips and their labels
CLAIM_QUERIES = 10
# token, savepoint pair, the worker's assignment locked, its HIT, its batch, the HIT's
# clips (with whether each was heard), state UPDATE, captions INSERT, pre-suggestions
# shown (edit mode's edit distances);
# the disagreement checks come from the periodic sweep, not from each submit
SUBMIT_QUERIES = 10


@pytest.fixture
def worker_client(ann: Any) -> Client:
    _, raw = api_token_create(user=ann, name="script")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    # the token's first use records last_used_at (then at most once a minute)
    assert client.get("/api/work/summary").status_code == 200
    return client


def _claim(client: Client) -> dict[str, Any]:
    response = client.post("/api/work/claim")
    assert response.status_code == 201, response.content
    return response.json()


def _heard(work: dict[str, Any]) -> None:
    listened(Assignment.objects.get(pk=work["id"]))


def _submit(client: Client, work: dict[str, Any]) -> None:
    captions = {str(clip["id"]): CAPTION for clip in work["clips"]}
    response = client.post(
        f"/api/work/assignments/{work['id']}/submit",
        json.dumps({"captions": captions}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content


def test_a_claim_takes_a_fixed_number_of_queries(
    batch: Batch, worker_client: Client, django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(CLAIM_QUERIES):
        work = _claim(worker_client)
    assert Assignment.objects.get(pk=work["id"]).state == Assignment.State.ACCEPTED


def test_a_claim_past_gated_batches_takes_no_more_queries(
    make_batch: MakeBatch,
    batch: Batch,
    alice: Any,
    worker_client: Client,
    django_assert_max_num_queries: Any,
) -> None:
    """Requirements and a qualification the worker lacks, on HITs ranked ahead of theirs."""
    subset = make_subset(batch.project, make_clips(2))
    ids = " ".join(str(pk) for pk in subset.clips.values_list("pk", flat=True))
    qualification = qualification_create(
        project=batch.project, created_by=alice, name="Listening test", clip_ids=ids
    )
    for _ in range(3):
        gated = make_batch(clips=2)
        gated.hits.update(priority=9)
        batch_requirements_set(
            batch=gated,
            by=alice,
            qualifications=[qualification],
            min_approval_percent=95,
            min_approved=10,
        )
    with django_assert_max_num_queries(CLAIM_QUERIES):
        work = _claim(worker_client)
    assert work["batch"]["id"] == batch.pk


def test_a_submit_takes_a_fixed_number_of_queries(
    batch: Batch, worker_client: Client, django_assert_max_num_queries: Any
) -> None:
    work = _claim(worker_client)
    _heard(work)
    with django_assert_max_num_queries(SUBMIT_QUERIES):
        _submit(worker_client, work)
    assert Assignment.objects.get(pk=work["id"]).state == Assignment.State.SUBMITTED


def test_claims_and_submits_keep_their_query_counts_in_a_loop(
    make_batch: MakeBatch, worker_client: Client, django_assert_max_num_queries: Any
) -> None:
    """The claim query is compiled once: later claims cost the same as the first."""
    make_batch(clips=4, captions_per_clip=1)
    for _ in range(4):
        with django_assert_max_num_queries(CLAIM_QUERIES):
            work = _claim(worker_client)
        _heard(work)
        with django_assert_max_num_queries(SUBMIT_QUERIES):
            _submit(worker_client, work)
    assert worker_client.post("/api/work/claim").status_code == 204
