"""demo.pages: the crawl the accessibility test and benchmarks/pages.py visit. Every link
a demo login is shown opens for that login (a reviewer is never linked to a researcher's
job page), and each login reaches its own screens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core.models import Project
from demo.pages import demo_pages
from demo.services import DEMO_USERS
from tests.demo.conftest import DemoSounds, quick_demo_seed, run_queued_training


@pytest.fixture
def demo(
    db: None,
    settings: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    demo_sounds: DemoSounds,
) -> Project:
    settings.VAR_DIR = tmp_path / "var"
    settings.MEDIA_ROOT = tmp_path / "var" / "media"
    project = quick_demo_seed(monkeypatch=monkeypatch, sounds=demo_sounds)
    run_queued_training()
    return project


def test_every_link_a_demo_login_is_shown_opens(demo: Project) -> None:
    refused: list[str] = []
    found: dict[str, list[str]] = {}
    for username in DEMO_USERS:
        client = Client(raise_request_exception=False)
        client.force_login(User.objects.get(username=username))
        found[username] = demo_pages(client=client, start=["/", "/work/"], refused=refused)

    assert refused == []
    assert "/projects/demo/active/" in found["reviewer"]
    assert "/projects/demo/runs/" not in found["annotator"]
    assert not [p for p in found["researcher"] if p.endswith((".png", ".csv", ".zip"))]
