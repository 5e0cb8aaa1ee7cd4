"""The platform registry and interface (annotation.platforms): every registered platform
implements base.CrowdPlatform, an unknown name is refused naming the known ones, and the
local platform is a no-op that sends its workers nowhere."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from annotation.models import Batch, Platform
from annotation.platforms import PLATFORMS, platform_currency, platform_get
from annotation.platforms.base import CrowdPlatform
from annotation.platforms.local import LocalPlatform
from annotation.platforms.mturk.platform import MTurkPlatform
from annotation.platforms.prolific.platform import ProlificPlatform
from annotation.services import hit_claim

# mypy checks each class against the interface here
IMPLEMENTED: list[CrowdPlatform] = [LocalPlatform(), MTurkPlatform(), ProlificPlatform()]
STEPS = [
    name
    for name in dir(CrowdPlatform)
    if not name.startswith("_") and name not in ("name", "label")
]


def test_every_platform_choice_is_registered() -> None:
    assert set(PLATFORMS) == set(Platform.values)


@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_each_registered_platform_has_every_step(name: str) -> None:
    platform = platform_get(name)
    assert platform.name == name
    assert all(callable(getattr(platform, step)) for step in STEPS)
    assert len(STEPS) == 13  # publish_check among them


def test_an_unknown_platform_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match="No crowd platform 'upwork'; known: local, mturk, prolific"
    ):
        platform_get("upwork")


def test_each_platform_pays_in_its_currency(settings: Any) -> None:
    settings.PROLIFIC_CURRENCY = "EUR"
    assert [platform_currency(p) for p in ("local", "mturk", "prolific")] == ["USD", "USD", "EUR"]


def test_the_local_platform_sends_its_workers_to_the_work_page(batch: Batch, ann: Any) -> None:
    local = platform_get("local")
    with pytest.raises(ValidationError, match="claimed on the work page"):
        local.arrive(batch=batch, hit=None, params={})
    assignment = hit_claim(worker=ann, batch=batch)
    assert assignment is not None
    assert local.completion_url(assignment=assignment, params={}) == "/work/"
    assert local.sync() == {}
