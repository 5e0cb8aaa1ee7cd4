"""The Content-Security-Policy, without a browser: every page carries it, no template
needs what it forbids, and the API docs come from this site's static files.
(tests/browser/test_csp.py checks the pages in Chromium under it.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
# The MTurk page is framed by MTurk and sends its own policy (annotation/platforms/mturk/views.py).
OWN_POLICY = {"annotation/mturk_hit.html", "annotation/mturk_submit.html"}
# a data block (type="application/json", as json_script and Swagger's settings) runs nothing
INLINE_SCRIPT = re.compile(
    r"<script(?![^>]*\b(?:src=|type=\"application/json\"))[^>]*>", re.IGNORECASE
)
HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
STYLE = re.compile(r"<style\b|\sstyle\s*=", re.IGNORECASE)


def _templates() -> list[Path]:
    return [
        path
        for path in sorted(TEMPLATES.rglob("*.html"))
        if str(path.relative_to(TEMPLATES)) not in OWN_POLICY
    ]


def test_pages_are_served_with_a_policy_that_allows_only_this_sites_scripts(db: None) -> None:
    policy = Client().get("/login/")["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy


@pytest.mark.parametrize("path", _templates(), ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_no_template_has_inline_script_event_handlers_or_style_attributes(path: Path) -> None:
    html = path.read_text()
    # json_script's data blocks are not scripts; they render as type="application/json"
    assert not INLINE_SCRIPT.search(html), "move the script to static/ (the policy blocks it)"
    assert not HANDLER.search(html), "bind the handler in static/*.js (the policy blocks it)"
    assert not STYLE.search(html), "use a class or data-width (the policy blocks style=)"


def test_the_api_docs_load_swagger_ui_from_the_pinned_package_not_a_cdn(db: None) -> None:
    html = Client().get("/api/docs").content.decode()
    assert '<script src="/static/ninja/swagger-ui-bundle.js">' in html
    assert "cdn" not in html.lower()


def test_the_api_docs_link_back_to_the_app(db: None) -> None:
    html = Client().get("/api/docs").content.decode()

    assert '<a href="/">← Back to Earmark</a>' in html


def test_the_api_schema_is_built_once_per_process(db: None) -> None:
    from earmark.api import api

    assert api.get_openapi_schema() is api.get_openapi_schema()
