"""Who a request comes from and how often it may come: the client's address behind the
configured proxies (django-axes counts failed logins by it) and the API's rate limits.

Rates are settings (API_RATE_*), read on every request, so a changed setting or a test's
override applies at once. Counts live in Django's cache: one per process with locmem://,
shared by every web process with CACHE_URL=redis://….
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from ninja.throttling import BaseThrottle


def client_ip(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or with TRUSTED_PROXY_COUNT proxies in front, the
    address the outermost of them appended to X-Forwarded-For (what a client writes there
    itself sits further left and is never read)."""
    remote = str(request.META.get("REMOTE_ADDR", ""))
    count = settings.TRUSTED_PROXY_COUNT
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [a for a in forwarded if a]
    if count == 0 or not forwarded:
        return remote
    return forwarded[-min(count, len(forwarded))]


_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}


def rate_parts(rate: str) -> tuple[int, int]:
    """(requests, seconds) of a "COUNT/PERIOD" rate such as "10/5min" (the settings'
    env_rate refused any other form at start-up)."""
    count, _, period = rate.partition("/")
    unit = period.lstrip("0123456789")
    multiple = int(period[: len(period) - len(unit)] or 1)
    return int(count), multiple * _SECONDS[unit]


class Rates(BaseThrottle):
    """Each of `rates` ((setting, scope) pairs: at most the rate in the setting, counted
    separately per scope) per signed-in user (per client address for anyone else), all in
    one cache round trip a request (`counts_bump`). An operation gets one Rates, naming every
    rate it counts against (ninja asks each throttle of a list on its own).

    Counts are sliding-window estimates over fixed windows of the rate's period (the
    current window's count plus the previous one's, weighted by how much of it the
    sliding window still covers), not logs of every request: an integer increment a
    request, where a log of 1,200 timestamps was read, unpickled, pickled and written
    back. A burst straddling two windows is limited as a log would limit it, give or
    take the weighting's rounding. A refused request counts too (the increment comes
    before the answer, in the same round trip): a client that keeps calling stays
    refused until it slows down."""

    def __init__(
        self, *rates: tuple[str, str], prefetch: Callable[[HttpRequest], list[str]] | None = None
    ) -> None:
        """`prefetch`: the cache keys an operation's view will read (from the request's
        path), read in the same round trip and handed to it by `prefetched`."""
        self.rates = rates
        self.prefetch = prefetch
        self._wait: float | None = None

    def allow_request(self, request: HttpRequest) -> bool:
        user = getattr(request, "auth", None)
        pk = getattr(user, "pk", None)
        ident = f"user-{pk}" if pk is not None else f"ip-{client_ip(request)}"
        now = time.time()
        windows = []
        bump: dict[str, int] = {}
        read: list[str] = []
        for setting, scope in self.rates:
            count, seconds = rate_parts(getattr(settings, setting))
            window = int(now // seconds)
            key = f"throttle_{scope}_{ident}_{seconds}s"
            bump[f"{key}_{window}"] = 2 * seconds  # read as the previous window next time
            read.append(f"{key}_{window - 1}")
            windows.append((count, seconds, window))
        extra = self.prefetch(request) if self.prefetch is not None else []
        counts, values = counts_bump(bump=bump, read=[*read, *extra])
        vars(request)[_PREFETCHED] = {key: values[key] for key in extra if key in values}
        self._wait = None
        for (count, seconds, window), current, previous in zip(
            windows, counts, (values.get(key) for key in read), strict=False
        ):
            elapsed = now - window * seconds
            estimate = int(previous or 0) * (1 - elapsed / seconds) + current
            if estimate > count:
                wait = seconds - elapsed
                self._wait = max(self._wait or 0.0, wait)
        return self._wait is None

    def wait(self) -> float | None:
        return self._wait


_PREFETCHED = "_throttle_prefetched"


def prefetched(request: HttpRequest) -> dict[str, Any] | None:
    """The values of the keys the request's throttle read for its view (`Rates`'s
    `prefetch`; missing keys left out), or None when no throttle read them: the view then
    asks the cache itself."""
    found: dict[str, Any] | None = vars(request).get(_PREFETCHED)
    return found


def counts_bump(*, bump: dict[str, int], read: list[str]) -> tuple[list[int], dict[str, Any]]:
    """Increments each key of `bump` (a new key starts at 0 and lives that many seconds)
    and reads each key of `read` (missing ones left out), in one round trip: a pipeline
    with a Redis cache; with another cache (locmem, in the process) one call per key,
    which costs no round trip. Returns the counts after the increments, in order, and
    the values read."""
    client, serializer = _redis_of(cache)
    if client is None:
        counts = []
        for key, timeout in bump.items():
            cache.add(key, 0, timeout)
            try:
                counts.append(cache.incr(key))
            except ValueError:  # evicted between the two calls: this request starts it
                cache.set(key, 1, timeout)
                counts.append(1)
        return counts, cache.get_many(read)
    keys = {key: cache.make_and_validate_key(key) for key in [*bump, *read]}
    pipeline = client.pipeline(transaction=False)
    for key, timeout in bump.items():
        pipeline.set(keys[key], 0, ex=timeout, nx=True)
        pipeline.incr(keys[key])
    for key in read:
        pipeline.get(keys[key])
    replies = pipeline.execute()
    counts = [int(n) for n in replies[1 : 2 * len(bump) : 2]]
    values = {
        key: serializer.loads(raw)
        for key, raw in zip(read, replies[2 * len(bump) :], strict=True)
        if raw is not None
    }
    return counts, values


def _redis_of(backend: Any) -> tuple[Any, Any]:
    """The redis client and value serializer behind Django's RedisCache, or (None, None)
    for another backend. Django's Redis cache stores integers as such (INCR works on
    them) and everything else through its serializer."""
    if not isinstance(backend, RedisCache):
        return None, None
    client = backend._cache  # type: ignore[attr-defined]  # Django's, not in its stubs
    return client.get_client(write=True), client._serializer


# Every API call of a user (the API's default); the crowd's claim and submit calls count
# against it too and against their own (a person claims and submits a few HITs a minute;
# a script grabbing the queue does not get far).
PER_USER = Rates(("API_RATE_PER_USER", "user"))
WORK = Rates(("API_RATE_PER_USER", "user"), ("API_RATE_WORK", "work"))


# Bad tokens count per client address AND token prefix: the token's first characters,
# "emk_" and 8 random ones (48 bits), which no two tokens are likely to share. A script
# repeating a revoked or expired token is refused before the lookup once it has sent
# API_RATE_BAD_TOKENS of them, while every other token from that address (a shared lab
# NAT's, Label Studio's) is looked up as usual: nobody spends a real token's budget
# without knowing its first characters.
TOKEN_PREFIX_CHARS = 12


def token_prefix(raw: str) -> str:
    return raw[:TOKEN_PREFIX_CHARS]


def bad_tokens_refusal(request: HttpRequest, raw: str) -> str | None:
    """Why the unknown, revoked or expired token `raw` is answered 429 (API_RATE_BAD_TOKENS
    bad tokens with its prefix came from this address within the rate's period), or None.
    Asked only once a token failed: a valid token is never refused for bad ones, and
    costs no cache round trip for them."""
    count, seconds = rate_parts(settings.API_RATE_BAD_TOKENS)
    recent = _recent_failures(request, raw, seconds)
    if len(recent) < count:
        return None
    wait = int(recent[0] + seconds - time.time()) + 1
    return (
        f"Too many bad API tokens starting {token_prefix(raw)!r} from your address; "
        f"try again in {wait} s."
    )


def bad_token_record(request: HttpRequest, raw: str) -> None:
    _, seconds = rate_parts(settings.API_RATE_BAD_TOKENS)
    recent = [*_recent_failures(request, raw, seconds), time.time()]
    cache.set(_bad_token_key(request, raw), recent, seconds)


def _bad_token_key(request: HttpRequest, raw: str) -> str:
    # hashed: the cache key holds neither the token's characters nor anything unprintable
    prefix = hashlib.sha256(token_prefix(raw).encode()).hexdigest()[:16]
    return f"throttle_bad_token_ip-{client_ip(request)}_prefix-{prefix}"


def _recent_failures(request: HttpRequest, raw: str, seconds: int) -> list[float]:
    since = time.time() - seconds
    return [t for t in cache.get(_bad_token_key(request, raw), []) if t > since]


# Logins ---------------------------------------------------------------------------------
# django-axes locks one (username, address) pair after LOGIN_FAILURE_LIMIT wrong passwords.
# Two more counts cover the other combinations, each over the lockout's period:
# - per address, across usernames (password spraying: one guess for each of many
#   usernames): past LOGIN_FAILURE_LIMIT_PER_ADDRESS, logins from that address wait;
# - per username, across addresses (a botnet guessing one account): past
#   LOGIN_FAILURE_LIMIT_PER_USERNAME, the username is refused from every address that
#   failed for it, while an address that has not (its owner at home) still logs in.


def _hashed(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _window() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds())


def _login_keys(request: HttpRequest, username: str) -> tuple[str, str, str]:
    address, user = client_ip(request), _hashed(username.casefold())
    return (
        f"throttle_login_ip-{address}",
        f"throttle_login_user-{user}",
        f"throttle_login_user-{user}_ip-{address}",
    )


def _recent(key: str, since: float) -> list[float]:
    return [t for t in cache.get(key, []) if t > since]


def login_refusal(request: HttpRequest, username: str) -> str | None:
    """Why a login as `username` from this request's address is refused now, or None."""
    by_address, by_username, pair = _login_keys(request, username)
    since = time.time() - _window()
    if len(_recent(by_address, since)) >= settings.LOGIN_FAILURE_LIMIT_PER_ADDRESS:
        return "Logins from your address are paused: too many wrong passwords came from it."
    if (
        len(_recent(by_username, since)) >= settings.LOGIN_FAILURE_LIMIT_PER_USERNAME
        and cache.get(pair) is not None
    ):
        return "Logins for this username are paused from addresses where its password failed."
    return None


def login_failure_record(request: HttpRequest, username: str) -> None:
    """Counts a wrong password; an attempt these limits refused is not counted again (a
    refused flood would otherwise grow the counts without end)."""
    if getattr(request, "login_refusal", None):
        return
    by_address, by_username, pair = _login_keys(request, username)
    now, window = time.time(), _window()
    for key, limit in (
        (by_address, settings.LOGIN_FAILURE_LIMIT_PER_ADDRESS),
        (by_username, settings.LOGIN_FAILURE_LIMIT_PER_USERNAME),
    ):
        # the latest `limit` times are all a refusal reads
        cache.set(key, [*_recent(key, now - window), now][-limit:], window)
    cache.set(pair, now, window)


class LoginThrottleBackend:
    """First of AUTHENTICATION_BACKENDS: refuses a login login_refusal refuses, before any
    password is checked. It marks the request locked out, so django-axes' middleware
    answers with its lockout page (429); Django still sends user_login_failed for it, which
    login_failure_record leaves uncounted."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, **kwargs: object
    ) -> None:
        if request is None or not username:
            return None
        if refusal := login_refusal(request, username):
            request.axes_locked_out = True  # type: ignore[attr-defined]
            request.login_refusal = refusal  # type: ignore[attr-defined]
            raise PermissionDenied(refusal)
        return None

    # No get_user: sessions name the backend that has one (ModelBackend), never this.
