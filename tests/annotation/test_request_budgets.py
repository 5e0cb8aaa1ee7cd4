"""What each call of the work API (/api/work/…) may cost the server: its database queries
and its cache calls, as a script makes them (bearer token). A query or a cache round trip
added to a worker's loop fails here, by name and count, before it shows in
benchmarks/load_claim_submit.py. Queries are counted inside the test's transaction, so an
atomic block shows as a SAVEPOINT / RELEASE pair; cache calls are round trips as a Redis
cache makes them (core.throttling.counts_bump is one, whatever it does inside). Not
counted: with DATABASE_HEALTH_CHECKS (the default), Django checks a kept connection with
a `SELECT 1` of its own before a request's first query, one more round trip a request."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import caches
from django.core.files.base import ContentFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment, Batch, ClipAudioServed
from core import throttling
from core.services import api_token_create, api_tokens
from curation.models import Clip
from curation.services import clip_audio_check
from tests.annotation.factories import CAPTION, listened, served_writes
from tests.conftest import wav_bytes

CACHE_METHODS = ("get", "set", "add", "delete", "incr", "decr", "get_many", "set_many", "touch")

# (queries, cache round trips) of each call. Cache: the request's rates in one round trip
# (throttling.Rates; a valid token costs no bad-token read); the audio's throttle reads in
# it too whether the file's header passed the check within the hour
# (curation.services.clip_media), which costs one more only when it has not (the pass is
# stored). Queries: none for the token, which the process looked up for the fixture's
# first call (API_TOKEN_CACHE_SECONDS; its clock held still here), then —
BUDGETS = {
    # PostgreSQL: the whole claim in one statement (held? pick … SKIP LOCKED, INSERT …
    # ON CONFLICT, slot UPDATE, with its HIT and batch back); the answer's clips with
    # their labels
    "claim": (2, 1),
    # the clip's first GET: the assignment with the HIT's clip and its served record (none
    # yet), the served record's one INSERT … ON CONFLICT
    "audio": (2, 1),
    # a replay, or a range, once the record holds the whole file: the same read, no write
    "audio_again": (1, 1),
    # the first GET of a file whose header was not checked within the hour: its pass stored
    "audio_unchecked": (2, 2),
    # PostgreSQL: the assignment with its HIT, batch, the worker's block and the clips with
    # whether each was heard; then the state UPDATE and captions INSERT in one statement
    "submit": (2, 1),
    # the assignment with its HIT and batch, the HIT's clips with their labels
    "assignment": (2, 1),
    "assignments": (1, 1),  # the list with HITs and batches
    "summary": (2, 1),  # the worker's counts and rewards by state, their bonuses
    # the assignment (404 check), then locked, its slot given back: state UPDATE, HIT
    # UPDATE, a savepoint pair
    "return": (6, 1),
}
# Elsewhere (SQLite) claim and submit take their portable path, in a transaction.
PORTABLE = {
    # a savepoint pair around the current assignment (locked where the database can), the
    # claim SELECT, the slot UPDATE … RETURNING, its batch, the assignment INSERT; the
    # answer's clips with their labels
    "claim": (8, 1),
    # a savepoint pair around: the assignment locked, its HIT, its batch (with the
    # worker's block), the clips with whether each was heard, state UPDATE, captions
    # INSERT, pre-suggestions shown
    "submit": (9, 1),
}


def _budget(name: str) -> tuple[int, int]:
    if connection.vendor != "postgresql" and name in PORTABLE:
        return PORTABLE[name]
    return BUDGETS[name]


@pytest.fixture
def worker_client(
    ann: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Client:
    settings.MEDIA_ROOT = tmp_path
    # the token's lookup stays kept however slowly the test runs
    monkeypatch.setattr(api_tokens.time, "monotonic", lambda: 1000.0)
    _, raw = api_token_create(user=ann, name="script")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    # the token's first use records last_used_at (then at most once a minute)
    assert client.get("/api/work/summary").status_code == 200
    return client


@pytest.fixture
def cache_round_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The cache calls made from now on, by name; counts_bump counts once."""
    calls: list[str] = []
    inside = [False]
    backend = caches["default"]
    for name in CACHE_METHODS:
        original = getattr(backend, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            if not inside[0]:
                calls.append(_name)
            return _original(*args, **kw)

        monkeypatch.setattr(backend, name, counted)
    bump = throttling.counts_bump

    def counted_bump(**kw: Any) -> Any:
        calls.append("counts_bump")
        inside[0] = True
        try:
            return bump(**kw)
        finally:
            inside[0] = False

    monkeypatch.setattr(throttling, "counts_bump", counted_bump)
    return calls


@pytest.fixture
def within(django_assert_num_queries: Any, cache_round_trips: list[str]) -> Callable[[str], Any]:
    """within(name): a block that must make exactly its budget of queries and cache round
    trips."""

    @contextmanager
    def check(name: str) -> Iterator[None]:
        queries, trips = _budget(name)
        cache_round_trips.clear()
        with django_assert_num_queries(queries):
            yield
        assert len(cache_round_trips) == trips, f"{name}: cache calls {cache_round_trips}"

    return check


def _claim(client: Client) -> dict[str, Any]:
    response = client.post("/api/work/claim")
    assert response.status_code == 201, response.content
    return response.json()


def _with_audio(work: dict[str, Any]) -> None:
    assignment = Assignment.objects.get(pk=work["id"])
    for hit_clip in assignment.hit.hit_clips.select_related("clip"):
        hit_clip.clip.audio.save(f"clip{hit_clip.clip_id}.wav", ContentFile(wav_bytes()))


def test_a_claim_keeps_its_budget(batch: Batch, worker_client: Client, within: Any) -> None:
    with within("claim"):
        _claim(worker_client)


def _audio_url(client: Client) -> str:
    work = _claim(client)
    _with_audio(work)
    return str(work["clips"][0]["audio_url"])


def _header_checked(url: str) -> None:
    """The clip's file passed its header check (as another worker's GET leaves it)."""
    clip_id = int(url.rstrip("/").split("/")[-2])
    clip_audio_check(clip=Clip.objects.get(pk=clip_id))


def test_an_audio_fetch_keeps_its_budget(batch: Batch, worker_client: Client, within: Any) -> None:
    url = _audio_url(worker_client)
    _header_checked(url)
    with within("audio"):
        assert worker_client.get(url).status_code == 200
    assert ClipAudioServed.objects.get().whole_at is not None


def test_an_audio_fetch_of_an_unchecked_file_keeps_its_budget(
    batch: Batch, worker_client: Client, within: Any
) -> None:
    url = _audio_url(worker_client)
    with within("audio_unchecked"):
        assert worker_client.get(url).status_code == 200


def test_audio_fetched_again_keeps_its_budget(
    batch: Batch, worker_client: Client, within: Any
) -> None:
    url = _audio_url(worker_client)
    assert worker_client.get(url).status_code == 200
    with within("audio_again"):
        assert worker_client.get(url).status_code == 200
    with within("audio_again"):
        assert worker_client.get(url, HTTP_RANGE="bytes=10-99").status_code == 206


def test_audio_served_whole_is_written_once(batch: Batch, worker_client: Client) -> None:
    """The served record is written by the clip's first GET, and by no replay or range
    request after it (each wrote an INSERT … ON CONFLICT that changed nothing)."""
    url = _audio_url(worker_client)
    with CaptureQueriesContext(connection) as first:
        assert worker_client.get(url).status_code == 200
    assert len(served_writes(first.captured_queries)) == 1
    for byte_range in (None, "bytes=0-", "bytes=5-20"):
        headers = {"Range": byte_range} if byte_range else {}
        with CaptureQueriesContext(connection) as again:
            assert worker_client.get(url, headers=headers).status_code in (200, 206)
        assert served_writes(again.captured_queries) == [], byte_range


def test_audio_ranges_are_written_until_they_hold_the_file(
    batch: Batch, worker_client: Client
) -> None:
    """A player fetching ranges: each new range is written, one already held is not, and
    the ranges that add up to the file make the record whole (then nothing is written)."""
    url = _audio_url(worker_client)
    size = len(wav_bytes())

    def get(first: int, last: int) -> list[str]:
        with CaptureQueriesContext(connection) as seen:
            response = worker_client.get(url, HTTP_RANGE=f"bytes={first}-{last}")
            assert response.status_code == 206
        return served_writes(seen.captured_queries)

    assert get(0, 99)
    assert get(10, 50) == []  # held already
    assert ClipAudioServed.objects.get().whole_at is None
    assert get(100, size - 1)
    assert ClipAudioServed.objects.get().whole_at is not None
    assert get(0, 99) == []


def test_a_submit_keeps_its_budget(batch: Batch, worker_client: Client, within: Any) -> None:
    work = _claim(worker_client)
    listened(Assignment.objects.get(pk=work["id"]))
    body = json.dumps({"captions": {str(c["id"]): CAPTION for c in work["clips"]}})
    with within("submit"):
        response = worker_client.post(
            f"/api/work/assignments/{work['id']}/submit", body, content_type="application/json"
        )
        assert response.status_code == 200, response.content


def test_an_assignment_read_keeps_its_budget(
    batch: Batch, worker_client: Client, within: Any
) -> None:
    work = _claim(worker_client)
    with within("assignment"):
        assert worker_client.get(f"/api/work/assignments/{work['id']}").status_code == 200


def test_the_assignment_list_keeps_its_budget(
    batch: Batch, worker_client: Client, within: Any
) -> None:
    _claim(worker_client)
    with within("assignments"):
        assert worker_client.get("/api/work/assignments").status_code == 200


def test_the_summary_keeps_its_budget(batch: Batch, worker_client: Client, within: Any) -> None:
    with within("summary"):
        assert worker_client.get("/api/work/summary").status_code == 200


def test_a_return_keeps_its_budget(batch: Batch, worker_client: Client, within: Any) -> None:
    work = _claim(worker_client)
    with within("return"):
        assert worker_client.post(f"/api/work/assignments/{work['id']}/return").status_code == 200


def test_audio_gets_count_against_the_users_rate(
    batch: Batch, worker_client: Client, settings: Any
) -> None:
    """The audio GET's own throttle (it reads the header check in its round trip) still
    counts every GET, replays and ranges included, against the API's rate per user."""
    url = _audio_url(worker_client)
    settings.API_RATE_PER_USER = "3/min"
    caches["default"].clear()  # the claim's and the summary's counts
    statuses = [worker_client.get(url).status_code for _ in range(2)]
    statuses.append(worker_client.get(url, headers={"Range": "bytes=0-9"}).status_code)
    statuses.append(worker_client.get(url).status_code)
    assert statuses == [200, 200, 206, 429]
