"""API tokens: creating one (its raw key shown once), authenticating a request's key, and
revoking one."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import connection
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from core.models import ApiToken, hash_token


def api_token_create(
    *,
    user: User,
    name: str,
    expires_at: datetime | None = None,
    read_only: bool = False,
    now: datetime | None = None,
) -> tuple[ApiToken, str]:
    """Returns the token row and the raw key, which is never stored and shown only once.
    `expires_at` (optional) must lie ahead; a `read_only` token may only read."""
    now = now or timezone.now()
    raw = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        user=user,
        name=name,
        key_hash=hash_token(raw),
        key_hint=raw[:10],
        created_at=now,
        expires_at=expires_at,
        read_only=read_only,
    )
    token.full_clean()
    token.save()
    return token, raw


TOKEN_TOUCH_INTERVAL = timedelta(minutes=1)


@dataclass(frozen=True)
class TokenHolder:
    """Who a live token speaks for, and whether it may only read."""

    user: User
    read_only: bool


@dataclass(frozen=True)
class _Lookup:
    """A live token's lookup, kept by the process until `until` (time.monotonic())."""

    until: float
    alias: str
    attnames: tuple[str, ...]
    values: tuple[Any, ...]
    read_only: bool


# A live token's lookup per key hash, in this process, for API_TOKEN_CACHE_SECONDS: every
# API request authenticates, and the lookup was one query (≈ 0.5-1 ms of server CPU) of
# each request of a worker's loop. Saving an ApiToken or a User anywhere in this process
# empties it (a revocation, a deactivation); other processes see it within the seconds.
_LOOKUPS: dict[str, _Lookup] = {}
_LOOKUPS_MAX = 4096


@receiver(post_save, sender=ApiToken, dispatch_uid="api_token_lookups_token_saved")
@receiver(post_delete, sender=ApiToken, dispatch_uid="api_token_lookups_token_deleted")
@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="api_token_lookups_user_saved")
@receiver(
    post_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="api_token_lookups_user_deleted"
)
def api_token_lookups_forget(**_: Any) -> None:
    """Empties this process's token lookups: a token or a user changed."""
    _LOOKUPS.clear()


def api_token_authenticate(*, raw: str) -> TokenHolder | None:
    """The active user a live token (not revoked, not expired) belongs to, or None. One
    query, or none when this process looked the token up less than
    API_TOKEN_CACHE_SECONDS ago (the user is then built afresh from the row it read,
    never shared between requests); a RawQuerySet skips the ORM's query building
    (≈ 1 ms of Python a call)."""
    key_hash = hash_token(raw)
    user_model = get_user_model()
    seconds = settings.API_TOKEN_CACHE_SECONDS
    kept = _LOOKUPS.get(key_hash) if seconds > 0 else None
    if kept is not None:
        if kept.until > time.monotonic():
            user = user_model.from_db(kept.alias, kept.attnames, kept.values)
            return TokenHolder(user=user, read_only=kept.read_only)
        del _LOOKUPS[key_hash]
    users, tokens = user_model._meta.db_table, ApiToken._meta.db_table
    now = timezone.now()
    adapt = connection.ops.adapt_datetimefield_value
    # To the minute is enough for the tokens page; a script calling in a loop would
    # otherwise write and commit this row on every request. The database compares, with
    # the time adapted as the backend stores it (an extra column of a raw query skips the
    # backend's converters, so reading the time back would need per-backend handling).
    stale_before = adapt(now - TOKEN_TOUCH_INTERVAL)
    # a token that expires before the lookup would be forgotten is looked up every time
    kept_until = adapt(now + timedelta(seconds=seconds))
    found = list(
        user_model.objects.raw(
            f"SELECT u.*, t.id AS token_pk, t.read_only AS token_read_only, "
            "(t.last_used_at IS NULL OR t.last_used_at <= %s) AS token_stale, "
            "(t.expires_at IS NULL OR t.expires_at > %s) AS token_lasts "
            f"FROM {users} u JOIN {tokens} t ON t.user_id = u.id "
            "WHERE t.key_hash = %s AND t.revoked_at IS NULL AND u.is_active "
            "AND (t.expires_at IS NULL OR t.expires_at > %s)",
            [stale_before, kept_until, key_hash, adapt(now)],
        )
    )
    if not found:
        return None
    user = found[0]
    # A raw query sets its extra columns as plain instance attributes, undeclared on User.
    token_columns = vars(user)
    if token_columns["token_stale"]:
        ApiToken.objects.filter(pk=token_columns["token_pk"]).update(last_used_at=now)
    # SQLite answers 0/1 for the boolean columns
    read_only = bool(token_columns["token_read_only"])
    if seconds > 0 and token_columns["token_lasts"]:
        if len(_LOOKUPS) >= _LOOKUPS_MAX:
            _LOOKUPS.clear()
        attnames = tuple(field.attname for field in user_model._meta.concrete_fields)
        _LOOKUPS[key_hash] = _Lookup(
            until=time.monotonic() + seconds,
            alias=user._state.db or "default",
            attnames=attnames,
            values=tuple(getattr(user, name) for name in attnames),
            read_only=read_only,
        )
    return TokenHolder(user=user, read_only=read_only)


def api_token_revoke(*, token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
