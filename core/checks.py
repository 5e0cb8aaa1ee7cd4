"""System checks of the deployment (`manage.py check --deploy`).

TRUSTED_PROXY_COUNT > 0 makes the client's address the one the last proxy appended to
X-Forwarded-For. That is right only when nothing but the proxy reaches the web process: a
client that reaches gunicorn directly writes its own X-Forwarded-For and chooses the
address every lockout and rate limit counts by. So with proxies the web process must
listen on a Unix socket, on loopback, or on a private address only the proxy reaches.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register


def bind_problem(address: str, proxies: int) -> str | None:
    """Why web processes listening on `address` (gunicorn's -b: "unix:/path", "host:port",
    "[v6]:port", "host") let clients choose their address, or None."""
    if proxies == 0 or address.startswith(("unix:", "fd://")):
        return None
    host = address.rsplit(":", 1)[0] if address.count(":") == 1 else address
    if host.startswith("["):
        host = host[1 : host.index("]")]
    elif address.count(":") > 1:  # a bare IPv6 address without a port
        host = address
    if host in ("localhost", ""):
        return None if host else f"{address} listens on every interface"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return f"{address} names a host whose addresses are not known here; bind to an address"
    if ip.is_unspecified:
        return f"{address} listens on every interface"
    if ip.is_loopback or ip.is_private:
        return None
    return f"{address} is a public address"


def bind_message(address: str, proxies: int) -> str | None:
    problem = bind_problem(address, proxies)
    if problem is None:
        return None
    return (
        f"TRUSTED_PROXY_COUNT={proxies} but the web process binds {problem}: a client that "
        "reaches it directly sets X-Forwarded-For and chooses the address lockouts and rate "
        "limits count by. Bind to a Unix socket or 127.0.0.1 behind the proxy (WEB_BIND)."
    )


@register(Tags.security, deploy=True)
def proxy_bind_check(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    message = bind_message(settings.WEB_BIND, settings.TRUSTED_PROXY_COUNT)
    return [Error(message, id="earmark.E001")] if message else []
