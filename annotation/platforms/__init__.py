"""Crowd platforms as plug-ins: where a batch's workers come from (Batch.platform).

Each platform is one package or module here implementing base.CrowdPlatform, named in
PLATFORMS below (a dict of dotted paths, imported on first use so a web process loads
boto3 or an HTTP client only when a platform is used). Its ids for Earmark's rows live in
annotation.PlatformRef (refs.py), never in columns of the core models, and its page, if
it has one, is mounted by earmark/urls.py through `urls`. A fourth platform is one more
package and one more line here (and its Platform choice): no core edits.
"""

from __future__ import annotations

from importlib import import_module

from django.conf import settings

from annotation.models import Platform
from annotation.platforms.base import CrowdPlatform

PLATFORMS: dict[str, str] = {
    Platform.LOCAL: "annotation.platforms.local.LocalPlatform",
    Platform.MTURK: "annotation.platforms.mturk.platform.MTurkPlatform",
    Platform.PROLIFIC: "annotation.platforms.prolific.platform.ProlificPlatform",
}


def platform_get(name: str) -> CrowdPlatform:
    """The platform called `name`; ValueError naming the known ones otherwise."""
    try:
        path = PLATFORMS[name]
    except KeyError:
        raise ValueError(
            f"No crowd platform {name!r}; known: {', '.join(sorted(PLATFORMS))}."
        ) from None
    module, _, cls = path.rpartition(".")
    platform: CrowdPlatform = getattr(import_module(module), cls)()
    return platform


def platform_currency(name: str) -> str:
    """The currency a platform pays in: its `<NAME>_CURRENCY` setting (PROLIFIC_CURRENCY),
    US dollars where it has none (MTurk, and local work, as the ledger always was)."""
    return str(getattr(settings, f"{name.upper()}_CURRENCY", "USD"))
