"""The Redis cache the web processes share (CACHE_URL=redis://…): Django's, keeping one redis
client per connection pool.

Django's RedisCacheClient.get_client builds a new `redis.Redis` for every cache call, and
redis-py's constructor fills a table of some 200 response callbacks each time: about 5 % of
the server's CPU in a worker's claim → audio → submit loop, which makes one or two cache
calls a request (py-spy profile, benchmarks/RESULTS.md). A `redis.Redis` is safe to share
between threads (each command borrows a connection from the pool, which starts afresh in
a forked child), so one client per pool does what a client per call did.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient
from redis import Redis


class SharedRedisCacheClient(RedisCacheClient):
    """RedisCacheClient whose get_client hands out one client per server (write: the
    first; reads: a replica, as Django picks them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Redis] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Redis:
        django: Any = self  # RedisCacheClient's pool table and picker (not in django-stubs)
        index = django._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            if index not in django._pools:
                django._pools[index] = django._pool_class.from_url(
                    django._servers[index], **django._pool_options
                )
            client = self._clients[index] = django._client(connection_pool=django._pools[index])
        return client


class RedisCache(DjangoRedisCache):
    """Django's RedisCache (same LOCATION and OPTIONS) over SharedRedisCacheClient."""

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = SharedRedisCacheClient
