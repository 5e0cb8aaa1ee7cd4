"""Who a request comes from and how often it may come: the client's address behind the
configured proxies (django-axes counts failed logins by it) and the API's rate limits.

Rates are settings (API_RATE_*), read on every request, so a changed setting or a test's
override applies at once. Counts live in Django's cache: one per process with locmem://,
shared by every web process with CACHE_URL=redis://….
"""

from __future__ import annotations

import hashlib
import time

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
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
    """Why `raw` is not even looked up (API_RATE_BAD_TOKENS unknown, revoked or expired
    tokens with its prefix came from this address within the rate's period), or None."""
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
