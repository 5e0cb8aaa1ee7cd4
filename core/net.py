"""Where a request comes from."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The client's IP address: the connection's own, or behind settings.NUM_PROXIES
    proxies the address the outermost of them saw (each appends the address it was
    reached from to X-Forwarded-For, so the client's is that many entries from the end;
    entries further left are whatever the client wrote)."""
    remote = str(request.META.get("REMOTE_ADDR", ""))
    proxies = settings.NUM_PROXIES
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR", ""))
    if proxies == 0 or not forwarded:
        return remote
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    return hops[-min(proxies, len(hops))] if hops else remote
