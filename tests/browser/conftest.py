"""Playwright on Debian's chromium (Playwright cannot download its own browsers here).

pytest-playwright drives the browser from an event loop in the test thread, so Django's
async-safety check would refuse the tests' own database access: allow it for this folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page

from core.models import Job, Project
from core.tasks import run_job
from tests.demo.conftest import (
    DemoSounds,
    demo_sounds_make,
    quick_demo_seed,
    run_queued_training,
)

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_MISSING = f"{CHROMIUM} is missing (apt-get install chromium); browser tests need it"


@pytest.fixture(scope="session")
def browser_type_launch_args() -> dict[str, Any]:
    if not CHROMIUM.exists():
        pytest.skip(CHROMIUM_MISSING)
    return {
        "executable_path": str(CHROMIUM),
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }


@pytest.fixture(autouse=True)
def csp_violations(browser: Browser, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every page of every test runs under the site's Content-Security-Policy: whatever it
    blocks (an inline script, an event handler, a style attribute, a foreign host) fails
    the test, so a page that only half works under the policy does not pass unnoticed."""
    violations: list[str] = []
    new_context = browser.new_context

    def watched(*args: Any, **kwargs: Any) -> BrowserContext:
        context = new_context(*args, **kwargs)

        def on_console(message: ConsoleMessage) -> None:
            if "Content Security Policy" in message.text:
                violations.append(f"{message.location.get('url', '?')}: {message.text}")

        context.on("console", on_console)
        return context

    monkeypatch.setattr(browser, "new_context", watched)
    yield violations
    assert not violations, "blocked by the Content-Security-Policy:\n" + "\n".join(violations)


@pytest.fixture(scope="module")
def demo_sounds(tmp_path_factory: pytest.TempPathFactory) -> DemoSounds:
    return demo_sounds_make(tmp_path_factory)


@pytest.fixture
def demo(
    db: None,
    settings: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    demo_sounds: DemoSounds,
) -> Project:
    """The demo project seeded (a few SynthScenes) with its first training run done."""
    settings.VAR_DIR = tmp_path / "var"
    settings.MEDIA_ROOT = tmp_path / "var" / "media"
    project = quick_demo_seed(monkeypatch=monkeypatch, sounds=demo_sounds)
    assert [j.state for j in run_queued_training()] == [Job.State.SUCCEEDED] * 2
    return project


@pytest.fixture
def sent_tasks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Job ids enqueued by the live server, kept off the real broker."""
    sent: list[int] = []
    task = run_job._get_current_object()  # type: ignore[attr-defined]  # a Proxy; stubs say Task
    monkeypatch.setattr(task, "apply_async", lambda args, **_: sent.append(args[0]))
    return sent


# what a page gets to answer in the tests that use `page_fails_fast`: a broken step fails in
# seconds instead of Playwright's 30 s default
FAIL_FAST_MS = 10_000


@pytest.fixture
def page_fails_fast(page: Page) -> Page:
    page.set_default_timeout(FAIL_FAST_MS)
    page.set_default_navigation_timeout(FAIL_FAST_MS)
    return page
