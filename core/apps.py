from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Projects, people and jobs"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from core import checks, roles, signals  # noqa: F401  (register checks, handlers)

        roles.connect()
        user_login_failed.connect(_login_failed, dispatch_uid="core.login_failed")


def _login_failed(
    sender: object, credentials: dict[str, object], request: object = None, **kw: object
) -> None:
    from django.http import HttpRequest

    from core.throttling import login_failure_record

    username = credentials.get("username")
    if isinstance(request, HttpRequest) and isinstance(username, str) and username:
        login_failure_record(request, username)
