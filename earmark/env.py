"""Typed readers for environment variables.

Every reader raises ImproperlyConfigured naming the variable when its value is
malformed, so a typo stops start-up instead of surfacing as a strange failure later.
"""

from __future__ import annotations

import math
import os
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off."
    )


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum of {minimum}.")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number.") from None
    if not math.isfinite(value):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a finite number.")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value:g} is below the minimum of {minimum:g}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


_RATE = re.compile(r"^(\d+)/(\d*)(s|sec|m|min|h|hour|d|day)$")


def env_rate(name: str, default: str) -> str:
    """A request rate as django-ninja's throttles read it: "COUNT/PERIOD", the period one of
    s, min, hour or day, optionally with a multiple ("10/5min": ten per five minutes)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    found = _RATE.match(value)
    if found is None or int(found.group(1)) < 1 or int(found.group(2) or 1) < 1:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not a rate; write COUNT/PERIOD, e.g. 10/min, 600/hour, 20/5min."
        )
    return value


def env_cache(name: str, default: str = "locmem://") -> dict[str, dict[str, object]]:
    """Django's CACHES from a URL: locmem:// (one cache per process) or redis://…, which
    every web process shares, so rate limits count each client once."""
    raw = os.environ.get(name) or default
    scheme = urlsplit(raw).scheme
    if scheme == "locmem":
        return {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    if scheme in {"redis", "rediss"}:
        return {"default": {"BACKEND": "core.cache.RedisCache", "LOCATION": raw}}
    raise ImproperlyConfigured(
        f"{name}={raw!r}: unsupported cache scheme {scheme!r}; use locmem:// or redis://host:6379/1"
    )


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """Django's SECURE_PROXY_SSL_HEADER from "Header-Name=value" (X-Forwarded-Proto=https):
    the header a TLS-terminating proxy sets, and strips from what clients send."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    header, sep, value = raw.partition("=")
    header, value = header.strip(), value.strip()
    if not sep or not value or not re.fullmatch(r"[A-Za-z0-9-]+", header):
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not HEADER=VALUE, e.g. X-Forwarded-Proto=https."
        )
    return "HTTP_" + header.upper().replace("-", "_"), value


def env_database(name: str, default: str, *, health_checks: bool = True) -> dict[str, Any]:
    """One entry of Django's DATABASES; its values are of mixed types (str, int, dict).

    Connections are kept for 60 s between requests; with `health_checks` each request
    checks its kept connection once before the first query and opens a new one when the
    old one died (a database restart, a terminated backend, a proxy's idle timeout),
    instead of failing that request on it."""
    raw = os.environ.get(name) or default
    scheme = urlsplit(raw).scheme
    if scheme not in {"sqlite", "postgres", "postgresql", "pgsql"}:
        raise ImproperlyConfigured(
            f"{name}={raw!r}: unsupported scheme {scheme!r}; use postgres://… or sqlite:///…"
        )
    try:
        config: dict[str, Any] = dict(
            dj_database_url.parse(raw, conn_max_age=60, conn_health_checks=health_checks)
        )
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a database URL: {exc}") from None
    if scheme != "sqlite" and not config.get("NAME"):
        raise ImproperlyConfigured(f"{name}={raw!r} names no database (…/DBNAME).")
    return config


# redis+socket:///path: Redis on a Unix socket (the embedded broker of `bin/earmark up`)
BROKER_SCHEMES = {
    "redis",
    "rediss",
    "redis+socket",
    "amqp",
    "amqps",
    "pyamqp",
    "filesystem",
    "memory",
}


def env_broker(name: str, default: str) -> str:
    raw = os.environ.get(name) or default
    scheme = urlsplit(raw).scheme
    if scheme not in BROKER_SCHEMES:
        raise ImproperlyConfigured(
            f"{name}={raw!r}: unsupported broker scheme {scheme!r}; "
            f"use one of {', '.join(sorted(BROKER_SCHEMES))}."
        )
    return raw


def env_storages(name: str) -> dict[str, dict[str, object]]:
    """Django's STORAGES from `name` (filesystem | s3) and, for s3, the S3_* variables.

    Media stays private either way: members get it through Earmark's views, which check
    who may hear a clip, so S3 objects are never public and URLs are never handed out.
    """
    kind = os.environ.get(name, "filesystem").strip().lower() or "filesystem"
    staticfiles: dict[str, object] = {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
    }
    if kind == "filesystem":
        # under MEDIA_ROOT, read when used (so tests may point it elsewhere)
        default: dict[str, object] = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
    elif kind == "s3":
        bucket = os.environ.get("S3_BUCKET", "").strip()
        if not bucket:
            raise ImproperlyConfigured(f"{name}=s3 needs S3_BUCKET, the bucket to keep media in.")
        endpoint = os.environ.get("S3_ENDPOINT_URL", "").strip()
        if endpoint and urlsplit(endpoint).scheme not in ("http", "https"):
            raise ImproperlyConfigured(
                f"S3_ENDPOINT_URL={endpoint!r} is not an http(s) URL, e.g. https://s3.example.org"
            )
        options: dict[str, object] = {
            "bucket_name": bucket,
            "location": os.environ.get("S3_PREFIX", "").strip("/"),
            "default_acl": "private",
            "querystring_auth": True,
            "file_overwrite": False,  # storage names stay unique, as on disk
        }
        if endpoint:
            options["endpoint_url"] = endpoint  # MinIO, Ceph, Garage, R2…
        region = os.environ.get("S3_REGION", "").strip()
        if region:
            options["region_name"] = region
        # credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or an instance role, read
        # by boto3 itself, so they never pass through settings
        default = {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}
    else:
        raise ImproperlyConfigured(f"{name}={kind!r} is not a storage; use filesystem or s3.")
    return {"default": default, "staticfiles": staticfiles}


DEV_SECRET_KEY_FILE = "dev-secret-key"


def dev_secret_key(var_dir: Path) -> str:
    """The signing key of a DEBUG install without SECRET_KEY: random, made on first start
    and kept in `var_dir` (mode 0600), so no two installs share one and nobody can forge
    the MTurk page tokens or sessions of a demo left running. Its owner alone reads it."""
    path = var_dir / DEV_SECRET_KEY_FILE
    var_dir.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL: of two processes starting at once, one writes and the other reads
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)  # a copy made with a looser mode is tightened
        key = path.read_text().strip()
        if len(key) < 50:
            raise ImproperlyConfigured(
                f"{path} holds no usable key (under 50 characters): delete it, and a new one "
                "is made at the next start, or set SECRET_KEY."
            ) from None
        return key
    key = secrets.token_urlsafe(50)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(key + "\n")
    return key
