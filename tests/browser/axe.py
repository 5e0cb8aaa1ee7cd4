"""axe-core in the browser: tests/browser/vendor/axe.min.js (axe-core 4.14.1 from npm,
MPL-2.0, unmodified; its licence beside it) evaluated in a page by Playwright, so the tests
need no network. Playwright's evaluate runs outside the page's Content-Security-Policy."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
BLOCKING = ("critical", "serious")


@cache
def _source() -> str:
    return AXE.read_text()


def axe_violations(page: Page, *, impacts: tuple[str, ...] = BLOCKING) -> list[str]:
    """One line per violation of `impacts` on the page as it stands: the rule, its impact,
    and the elements it found (CSS selectors), for a failure message a person can act on."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(_source())
    results: dict[str, Any] = page.evaluate(
        "() => axe.run(document, {resultTypes: ['violations']})"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at "
        + ", ".join(" ".join(map(str, node["target"])) for node in v["nodes"][:5])
        for v in results["violations"]
        if v["impact"] in impacts
    ]
