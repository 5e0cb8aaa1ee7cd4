"""`manage.py prolific_check`: are Prolific mode's settings usable against the real API?"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from annotation.platforms.prolific.client import ProlificClient, ProlificError


def prolific_check(
    *, client: ProlificClient | None = None, echo: Callable[[str], object] = print
) -> list[str]:
    """What stops Prolific mode from working, one line each (empty when nothing): the
    token is refused, the workspace is not reachable with it, the study URL base is not
    https. Asks the API only with a token configured."""
    problems: list[str] = []
    if not settings.PROLIFIC_EXTERNAL_URL.startswith("https://"):
        problems.append("PROLIFIC_EXTERNAL_URL is not an https:// address participants can reach.")
    try:
        client = client or ProlificClient()
    except ImproperlyConfigured as exc:
        return [*problems, str(exc)]
    try:
        me = client.get("users/me/")
        echo(f"token accepted: researcher {me.get('id')}")
    except ProlificError as exc:
        return [*problems, f"Prolific refused the token: {exc}"]
    workspace = settings.PROLIFIC_WORKSPACE_ID
    if not workspace:
        problems.append("Set PROLIFIC_WORKSPACE_ID to the workspace studies are made in.")
    else:
        try:
            found = client.get(f"workspaces/{workspace}/")
            echo(f"workspace {found.get('id')}: {found.get('title', '')}")
        except ProlificError as exc:
            problems.append(f"Workspace {workspace} is not reachable: {exc}")
    return problems
