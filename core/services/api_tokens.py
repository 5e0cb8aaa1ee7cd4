"""API tokens: creating one (its raw key shown once), authenticating a request's key, and
revoking one."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import connection
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


def api_token_authenticate(*, raw: str) -> TokenHolder | None:
    """The active user a live token (not revoked, not expired) belongs to, or None. One
    query: every API request runs it, and a RawQuerySet skips the ORM's query building
    (≈ 1 ms of Python a call)."""
    user_model = get_user_model()
    users, tokens = user_model._meta.db_table, ApiToken._meta.db_table
    now = timezone.now()
    # To the minute is enough for the tokens page; a script calling in a loop would
    # otherwise write and commit this row on every request. The database compares, with
    # the time adapted as the backend stores it (an extra column of a raw query skips the
    # backend's converters, so reading the time back would need per-backend handling).
    stale_before = connection.ops.adapt_datetimefield_value(now - TOKEN_TOUCH_INTERVAL)
    found = list(
        user_model.objects.raw(
            f"SELECT u.*, t.id AS token_pk, t.read_only AS token_read_only, "
            "(t.last_used_at IS NULL OR t.last_used_at <= %s) AS token_stale "
            f"FROM {users} u JOIN {tokens} t ON t.user_id = u.id "
            "WHERE t.key_hash = %s AND t.revoked_at IS NULL AND u.is_active "
            "AND (t.expires_at IS NULL OR t.expires_at > %s)",
            [stale_before, hash_token(raw), connection.ops.adapt_datetimefield_value(now)],
        )
    )
    if not found:
        return None
    user = found[0]
    # A raw query sets its extra columns as plain instance attributes, undeclared on User.
    token_columns = vars(user)
    if token_columns["token_stale"]:
        ApiToken.objects.filter(pk=token_columns["token_pk"]).update(last_used_at=now)
    # SQLite answers 0/1 for the boolean column
    return TokenHolder(user=user, read_only=bool(token_columns["token_read_only"]))


def api_token_revoke(*, token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
