"""Playwright on Debian's chromium (Playwright cannot download its own browsers here).

pytest-playwright drives the browser from an event loop in the test thread, so Django's
async-safety check would refuse the tests' own database access: allow it for this folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

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
