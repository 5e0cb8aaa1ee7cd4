"""core/cache.py: Django's Redis cache with one redis client per server, not one per call."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis

from core.cache import RedisCache


def _url() -> str:
    url = os.environ.get("CACHE_URL") or os.environ.get("CELERY_BROKER_URL", "")
    return url if url.startswith(("redis://", "rediss://")) else "redis://127.0.0.1:6379/0"


def _client_of(backend: RedisCache) -> Any:
    return backend._cache  # type: ignore[attr-defined]  # Django's, not in its stubs


def test_every_call_gets_the_same_client_for_writes() -> None:
    backend = RedisCache("redis://cache.internal:6379/1", {})

    first = _client_of(backend).get_client(write=True)

    assert _client_of(backend).get_client("key", write=True) is first
    assert _client_of(backend).get_client() is first  # one server: reads go to it too


def test_reads_from_a_replica_use_that_replicas_client() -> None:
    backend = RedisCache("redis://primary:6379/1,redis://replica:6379/1", {})

    write = _client_of(backend).get_client(write=True)
    read = _client_of(backend).get_client()

    assert read is not write
    assert _client_of(backend).get_client() is read
    assert read.connection_pool.connection_kwargs["host"] == "replica"


def test_threads_sharing_the_client_count_every_increment() -> None:
    backend = RedisCache(_url(), {"KEY_PREFIX": f"test-cache-{os.getpid()}"})
    try:
        backend.set("hits", 0, 60)
    except redis.ConnectionError:
        pytest.skip(f"Redis at {_url()} does not answer")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _: backend.incr("hits"), range(400)))

    assert backend.get("hits") == 400
    backend.delete("hits")
