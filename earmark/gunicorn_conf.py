"""gunicorn's settings for Earmark (`gunicorn -c python:earmark.gunicorn_conf earmark.wsgi`):
it binds WEB_BIND (default 127.0.0.1:8000), and refuses to start when TRUSTED_PROXY_COUNT
is set while it listens where clients could reach it without the proxy (core.checks)."""

from __future__ import annotations

import os
from typing import Any

bind = [os.environ.get("WEB_BIND", "127.0.0.1:8000")]


def on_starting(server: Any) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "earmark.settings")
    django.setup()
    from django.conf import settings

    from core.checks import bind_message

    for address in server.cfg.bind:
        if message := bind_message(address, settings.TRUSTED_PROXY_COUNT):
            raise SystemExit(f"earmark: {message}")
