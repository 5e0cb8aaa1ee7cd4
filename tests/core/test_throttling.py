"""Brute force and abuse: login lockout (django-axes) and the API's rate limits."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
import redis
from django.core.cache.backends.redis import RedisCache
from django.test import Client, RequestFactory

from core import throttling
from core.models import Project
from core.services import api_token_create
from core.throttling import client_ip, rate_parts
from tests.conftest import PASSWORD


def _log_in(client: Client, username: str, password: str, **extra: Any) -> Any:
    return client.post("/login/", {"username": username, "password": password}, **extra)


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


# Logins ---------------------------------------------------------------------------------


def test_thirty_wrong_passwords_lock_the_right_one_out(alice: Any) -> None:
    client = Client()
    for _ in range(30):
        _log_in(client, "alice", "wrong-password")
    response = _log_in(client, "alice", PASSWORD)
    assert response.status_code == 429
    assert b"Too many failed logins" in response.content
    assert not _signed_in(client)


def test_the_lockout_starts_at_the_failure_limit(alice: Any, settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    client = Client()
    assert [_log_in(client, "alice", "nope").status_code for _ in range(3)] == [200, 200, 429]


def test_a_lockout_holds_one_username_from_one_address_only(alice: Any, rey: Any) -> None:
    attacker = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(30):
        _log_in(attacker, "alice", "wrong-password")
    assert _log_in(attacker, "rey", PASSWORD).status_code == 302  # another user, same address
    alice_at_home = Client(REMOTE_ADDR="198.51.100.7")
    assert _log_in(alice_at_home, "alice", PASSWORD).status_code == 302
    assert _signed_in(alice_at_home)


def test_a_good_login_clears_the_failures_before_it(alice: Any, settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    client = Client()
    _log_in(client, "alice", "nope")
    _log_in(client, "alice", "nope")
    assert _log_in(client, "alice", PASSWORD).status_code == 302
    client.logout()
    _log_in(client, "alice", "nope")
    assert _log_in(client, "alice", PASSWORD).status_code == 302


def test_the_client_address_is_the_peer_without_trusted_proxies(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 0
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="1.2.3.4")
    assert client_ip(request) == "10.0.0.2"


def test_behind_a_proxy_the_address_it_appended_counts_not_what_the_client_wrote(
    settings: Any,
) -> None:
    settings.TRUSTED_PROXY_COUNT = 1
    request = RequestFactory().get(
        "/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.7"
    )
    assert client_ip(request) == "198.51.100.7"


def test_a_rate_reads_as_requests_per_seconds() -> None:
    assert rate_parts("10/min") == (10, 60)
    assert rate_parts("20/5min") == (20, 300)
    assert rate_parts("600/hour") == (600, 3600)


# API ------------------------------------------------------------------------------------


def _bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


def test_a_repeated_bad_token_is_refused_for_a_while(project: Project, settings: Any) -> None:
    settings.API_RATE_BAD_TOKENS = "5/hour"
    client = Client()
    statuses = [
        client.get("/api/projects/", headers=_bearer(f"emk_revoked-{i}")).status_code
        for i in range(6)
    ]
    assert statuses == [401] * 5 + [429]
    response = client.get("/api/projects/", headers=_bearer("emk_revoked-9"))
    assert "Too many bad API tokens starting 'emk_revoked-'" in response.json()["detail"]


def test_bad_tokens_from_a_shared_address_never_refuse_a_valid_token(
    project: Project, alice: Any, settings: Any
) -> None:
    settings.API_RATE_BAD_TOKENS = "5/hour"
    lab = Client(REMOTE_ADDR="192.0.2.1")  # one NAT for the whole lab
    for i in range(40):
        lab.get("/api/projects/", headers=_bearer(f"emk_{i:08d}-stale-token"))
    good = api_token_create(user=alice, name="script")[1]
    assert lab.get("/api/projects/", headers=_bearer(good)).status_code == 200


def test_bad_tokens_sharing_a_valid_tokens_prefix_never_refuse_it(
    project: Project, alice: Any, settings: Any
) -> None:
    settings.API_RATE_BAD_TOKENS = "5/hour"
    good = api_token_create(user=alice, name="script")[1]
    client = Client(REMOTE_ADDR="192.0.2.1")
    for i in range(6):  # someone who knows the token's first characters guesses the rest
        client.get("/api/projects/", headers=_bearer(f"{throttling.token_prefix(good)}-guess{i}"))
    assert client.get("/api/projects/", headers=_bearer(good)).status_code == 200


def test_bad_tokens_from_one_address_leave_other_addresses_alone(
    project: Project, alice: Any, settings: Any
) -> None:
    settings.API_RATE_BAD_TOKENS = "2/hour"
    for _ in range(3):
        Client(REMOTE_ADDR="203.0.113.9").get("/api/projects/", headers=_bearer("emk_guess"))
    good = api_token_create(user=alice, name="script")[1]
    response = Client(REMOTE_ADDR="198.51.100.7").get("/api/projects/", headers=_bearer(good))
    assert response.status_code == 200


def test_every_api_call_counts_against_the_users_rate(
    project: Project, alice: Any, rey: Any, settings: Any
) -> None:
    settings.API_RATE_PER_USER = "3/min"
    client = Client()
    raw = api_token_create(user=alice, name="script")[1]
    statuses = [client.get("/api/projects/", headers=_bearer(raw)).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    other = api_token_create(user=rey, name="script")[1]
    assert client.get("/api/projects/", headers=_bearer(other)).status_code == 200


@pytest.mark.parametrize("path", ["/api/work/claim", "/api/work/assignments/999999/submit"])
def test_claim_and_submit_have_their_own_tighter_rate(
    project: Project, ann: Any, settings: Any, path: str
) -> None:
    settings.API_RATE_WORK = "2/min"
    client = Client()
    raw = api_token_create(user=ann, name="script")[1]

    def post() -> int:
        body: dict[str, Any] = {"captions": {}}
        return client.post(
            path, body, content_type="application/json", headers=_bearer(raw)
        ).status_code

    assert [post() for _ in range(3)][2] == 429
    assert client.get("/api/work/summary", headers=_bearer(raw)).status_code == 200


def test_password_spraying_across_usernames_is_paused_per_address(
    alice: Any, rey: Any, settings: Any
) -> None:
    settings.LOGIN_FAILURE_LIMIT_PER_ADDRESS = 5
    sprayer = Client(REMOTE_ADDR="203.0.113.9")
    statuses = [_log_in(sprayer, f"user{i}", "Summer2026!").status_code for i in range(5)]
    assert statuses == [200] * 5  # one guess each: no (username, address) pair is near its limit
    response = _log_in(sprayer, "alice", PASSWORD)
    assert response.status_code == 429
    assert b"Logins from your address are paused" in response.content
    assert not _signed_in(sprayer)
    assert _log_in(Client(REMOTE_ADDR="198.51.100.7"), "rey", PASSWORD).status_code == 302


def test_guessing_one_username_from_many_addresses_is_paused_there_only(
    alice: Any, settings: Any
) -> None:
    settings.LOGIN_FAILURE_LIMIT_PER_USERNAME = 6
    bots = [Client(REMOTE_ADDR=f"203.0.113.{n}") for n in range(1, 4)]
    for _ in range(2):
        for bot in bots:
            assert _log_in(bot, "alice", "wrong-password").status_code == 200
    response = _log_in(bots[0], "alice", PASSWORD)
    assert response.status_code == 429
    assert b"Logins for this username are paused" in response.content
    alice_at_home = Client(REMOTE_ADDR="198.51.100.7")  # never failed for alice
    assert _log_in(alice_at_home, "alice", PASSWORD).status_code == 302


def _redis_cache() -> Any:
    """A Redis cache on CACHE_URL (or the Celery broker's Redis), or a skip."""
    url = os.environ.get("CACHE_URL") or os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith(("redis://", "rediss://")):
        pytest.skip("no Redis: set CACHE_URL or CELERY_BROKER_URL to redis://…")
    backend = RedisCache(url, {"KEY_PREFIX": f"test-throttling-{os.getpid()}"})
    try:
        backend.get("ping")
    except redis.ConnectionError:
        pytest.skip(f"Redis at {url} does not answer")
    return backend


def test_a_requests_rates_take_one_round_trip_to_redis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = _redis_cache()
    monkeypatch.setattr(throttling, "cache", backend)
    trips: list[str] = []
    for cls, name in ((redis.Redis, "execute_command"), (redis.client.Pipeline, "execute")):
        original = getattr(cls, name)

        def counted(self: Any, *args: Any, _o: Any = original, _n: str = name, **kw: Any) -> Any:
            trips.append(_n)
            return _o(self, *args, **kw)

        monkeypatch.setattr(cls, name, counted)
    backend.set("throttle_bad_token_ip-198.51.100.7", [time.time()], 60)
    trips.clear()
    first, values = throttling.counts_bump(
        bump={"a": 60, "b": 60}, read=["throttle_bad_token_ip-198.51.100.7", "missing"]
    )
    again, _ = throttling.counts_bump(bump={"a": 60, "b": 60}, read=[])
    assert trips == ["execute", "execute"]  # one pipeline a call
    assert (first, again) == ([1, 1], [2, 2])
    assert list(values) == ["throttle_bad_token_ip-198.51.100.7"]  # as Django stored it
    backend.delete_many(["a", "b", "throttle_bad_token_ip-198.51.100.7"])


@pytest.mark.parametrize("on_redis", [False, True])
def test_a_rates_prefetch_is_read_in_its_round_trip_and_handed_to_the_view(
    monkeypatch: pytest.MonkeyPatch, on_redis: bool, alice: Any
) -> None:
    """Rates(prefetch=…) reads the keys a view will need in the throttle's own round trip
    (the audio GET's header check, annotation.api); a key not stored is left out."""
    if on_redis:
        backend = _redis_cache()
        monkeypatch.setattr(throttling, "cache", backend)
    else:
        from django.core.cache import cache as backend
    backend.set("prefetched-here", "clip.wav:204", 60)
    rates = throttling.Rates(
        ("API_RATE_PER_USER", "user"), prefetch=lambda r: ["prefetched-here", "not-stored"]
    )
    trips: list[int] = []
    bump = throttling.counts_bump

    def counted(**kw: Any) -> Any:
        trips.append(1)
        return bump(**kw)

    monkeypatch.setattr(throttling, "counts_bump", counted)
    request = RequestFactory().get("/api/work/assignments/1/clips/2/audio")
    assert throttling.prefetched(request) is None  # no throttle read anything
    request.auth = alice  # type: ignore[attr-defined]
    assert rates.allow_request(request)
    assert trips == [1]
    assert throttling.prefetched(request) == {"prefetched-here": "clip.wav:204"}
    backend.delete("prefetched-here")
