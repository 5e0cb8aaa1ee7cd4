"""Request counts for the platforms' pages, in Django's cache (shared by several web
processes only through a shared cache backend)."""

from __future__ import annotations

from django.core.cache import cache


def counted(key: str, window: int) -> int:
    """Adds one to the count under `key`, kept `window` seconds; returns the new count."""
    cache.add(key, 0, timeout=window)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=window)
        return 1
