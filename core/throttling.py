"""Who a request comes from and how often it may come: the client's address behind the
configured proxies (django-axes counts failed logins by it) and the API's rate limits.

Rates are settings (API_RATE_*), read on every request, so a changed setting or a test's
override applies at once. Counts live in Django's cache: one per process with locmem://,
shared by every web process with CACHE_URL=redis://….
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from ninja.throttling import SimpleRateThrottle


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


class RateThrottle(SimpleRateThrottle):
    """At most the rate in `setting` per signed-in user (per client address for anyone
    else), counted separately for each `scope`."""

    def __init__(self, *, setting: str, scope: str) -> None:
        self.setting = setting
        self.scope = scope
        super().__init__(rate=getattr(settings, setting))

    def parse_rate(self, rate: str | None) -> tuple[int, int]:
        return rate_parts(rate or getattr(settings, self.setting))

    def allow_request(self, request: HttpRequest) -> bool:
        rate = getattr(settings, self.setting)
        if rate != self.rate:
            self.rate = rate
            self.num_requests, self.duration = rate_parts(rate)
        return super().allow_request(request)

    def get_cache_key(self, request: HttpRequest) -> str:
        user = getattr(request, "auth", None)
        pk = getattr(user, "pk", None)
        ident = f"user-{pk}" if pk is not None else f"ip-{client_ip(request)}"
        return f"throttle_{self.scope}_{ident}"


# Every API call of a user; the crowd's claim and submit calls (a person claims and submits
# a few HITs a minute; a script grabbing the queue does not get far).
PER_USER = RateThrottle(setting="API_RATE_PER_USER", scope="user")
WORK = RateThrottle(setting="API_RATE_WORK", scope="work")


def bad_tokens_refusal(request: HttpRequest) -> str | None:
    """Why the client's next token is not even looked up (it sent API_RATE_BAD_TOKENS
    unknown, revoked or expired tokens within the rate's period), or None."""
    count, seconds = rate_parts(settings.API_RATE_BAD_TOKENS)
    recent = _recent_failures(request, seconds)
    if len(recent) < count:
        return None
    wait = int(recent[0] + seconds - time.time()) + 1
    return f"Too many bad API tokens from your address; try again in {wait} s."


def bad_token_record(request: HttpRequest) -> None:
    _, seconds = rate_parts(settings.API_RATE_BAD_TOKENS)
    recent = [*_recent_failures(request, seconds), time.time()]
    cache.set(_bad_token_key(request), recent, seconds)


def _bad_token_key(request: HttpRequest) -> str:
    return f"throttle_bad_token_ip-{client_ip(request)}"


def _recent_failures(request: HttpRequest, seconds: int) -> list[float]:
    since = time.time() - seconds
    return [t for t in cache.get(_bad_token_key(request), []) if t > since]
