"""A local HTTP server that speaks LanguageTool's /v2 JSON, for tests and the benchmark.

It is not LanguageTool: it knows three rules, enough to exercise a client honestly:

- ``EN_A_VS_AN``: "a" before a vowel ("a owl" -> "an owl");
- ``ENGLISH_WORD_REPEAT_RULE``: a word (or emoji) said twice ("the the" -> "the"), which
  overlaps EN_A_VS_AN on "a a owl";
- ``MORFOLOGIK_RULE_EN_US``: a few misspellings, one of them with no suggestion.

Offsets and lengths are what LanguageTool (Java) reports: UTF-16 code units, so a
character outside the Basic Multilingual Plane (most emoji) counts twice.
``disabledRules`` is honoured. ``fail`` makes every /v2/check answer that HTTP status
(or "not-json"); ``requests`` records each check's form fields and client port.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

MISSPELLINGS: dict[str, list[str]] = {"barkss": ["barks"], "dgo": ["dog", "go"], "xqzt": []}
_A_BEFORE_VOWEL = re.compile(r"\b([Aa]) (?=[aeiouAEIOU])")
_REPEAT = re.compile(r"(?<!\S)(\S+) \1(?!\S)", re.IGNORECASE)  # "the the", "🐝🐝 🐝🐝"
_WORD = re.compile(r"\w+")


def utf16(text: str, index: int) -> int:
    """The Java (UTF-16) offset of Python index `index` in `text`."""
    return len(text[:index].encode("utf-16-le")) // 2


def _match(text: str, start: int, end: int, rule: str, category: str, repl: list[str]) -> dict:
    offset, stop = utf16(text, start), utf16(text, end)
    return {
        "message": f"{rule} found {text[start:end]!r}",
        "shortMessage": "",
        "replacements": [{"value": r} for r in repl],
        "offset": offset,
        "length": stop - offset,
        "context": {"text": text[max(0, start - 20) : end + 20], "offset": 0, "length": 0},
        "sentence": text,
        "rule": {
            "id": rule,
            "description": rule,
            "issueType": "grammar",
            "category": {"id": category, "name": category},
        },
    }


def find_matches(text: str, disabled: Collection[str] = frozenset()) -> list[dict]:
    matches: list[tuple[int, dict]] = []
    if "EN_A_VS_AN" not in disabled:
        for m in _A_BEFORE_VOWEL.finditer(text):
            repl = "An" if m.group(1) == "A" else "an"
            matches.append(
                (m.start(1), _match(text, m.start(1), m.end(1), "EN_A_VS_AN", "MISC", [repl]))
            )
    if "ENGLISH_WORD_REPEAT_RULE" not in disabled:
        for m in _REPEAT.finditer(text):
            item = _match(
                text, m.start(), m.end(), "ENGLISH_WORD_REPEAT_RULE", "MISC", [m.group(1)]
            )
            matches.append((m.start(), item))
    if "MORFOLOGIK_RULE_EN_US" not in disabled:
        for m in _WORD.finditer(text):
            if m.group(0).lower() in MISSPELLINGS:
                spellings = MISSPELLINGS[m.group(0).lower()]
                item = _match(text, m.start(), m.end(), "MORFOLOGIK_RULE_EN_US", "TYPOS", spellings)
                matches.append((m.start(), item))
    return [item for _, item in sorted(matches, key=lambda pair: pair[0])]


@dataclass
class FakeLanguageTool:
    url: str = ""
    fail: int | str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)


def _handler(state: FakeLanguageTool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as LanguageTool's server does

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.startswith("/v2/languages"):
                body = [{"name": "English (US)", "code": "en", "longCode": "en-US"}]
                self._send(200, json.dumps(body).encode())
            elif self.path.startswith("/v2/healthcheck"):
                self._send(200, b"OK", "text/plain")
            else:
                self._send(404, b"not found", "text/plain")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            if not self.path.startswith("/v2/check"):
                self._send(404, b"not found", "text/plain")
                return
            state.requests.append({**form, "client_port": self.client_address[1]})
            if state.fail == "not-json":
                self._send(200, b"<html>busy</html>", "text/html")
                return
            if isinstance(state.fail, int):
                self._send(state.fail, b"Error: the server is overloaded", "text/plain")
                return
            disabled = set(filter(None, form.get("disabledRules", "").split(",")))
            matches = find_matches(form.get("text", ""), disabled)
            body = {"software": {"name": "fake"}, "matches": matches}
            self._send(200, json.dumps(body).encode())

    return Handler


@contextmanager
def fake_languagetool() -> Iterator[FakeLanguageTool]:
    state = FakeLanguageTool()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
