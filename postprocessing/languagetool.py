"""LanguageTool grammar correction: one client for the HTTP API, three ways to reach a server.

Where the server is (``Config``, filled from settings), in order of preference:

1. ``url``: a remote or self-hosted LanguageTool server (``LANGUAGETOOL_URL``).
2. ``jar_dir``: an offline install, an unzipped ``LanguageTool-<version>`` folder
   (``LTP_JAR_DIR_PATH``); language-tool-python starts its HTTP server locally.
3. language-tool-python's download cache (``LTP_PATH``, else ``~/.cache/language_tool_python``):
   a copy downloaded earlier is started locally; with ``download`` on, the first use downloads
   one (language-tool-python verifies its hash).

A local server is started once per process and reused. Whatever the way, checks go through
``LanguageToolClient``: many captions per ``/v2/check`` request (joined by blank lines, so
each is its own paragraph), one HTTP session kept open. LanguageTool reports offsets in
Java ``String`` indices, i.e. UTF-16 code units, so an emoji before an error shifts it by
two; offsets are converted to Python indices here (language-tool-python's own ``Match``
fixes the offset but not the length). When no server can be reached, ``LanguageToolUnavailable``
says why and the pipeline records the grammar step as skipped with that reason.

No Django here: the modeling code reuses this module.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

if TYPE_CHECKING:
    from language_tool_python import LanguageTool

log = logging.getLogger(__name__)

SEPARATOR = "\n\n"  # a paragraph break: LanguageTool checks each caption on its own
# A local server that failed to start (no Java, no network for the download) is not
# retried for this long, so a run over 50,000 captions does not try once per batch.
RETRY_AFTER_SECONDS = 300.0
_VERSIONED_DIR = re.compile(r"^LanguageTool-(\d+\.\d+|\d{8}|latest)$")


class LanguageToolUnavailable(Exception):
    """No LanguageTool answered usefully; the message says which and why."""


@dataclass(frozen=True)
class Config:
    url: str = ""  # http(s)://host:port of a server; "/v2/check" is added
    jar_dir: str = ""  # an unzipped LanguageTool-<version> folder
    download: bool = False  # let language-tool-python download LanguageTool when not cached
    language: str = "en-US"
    disabled_rules: tuple[str, ...] = ()
    max_chars: int = 20_000  # text per request; LanguageTool's public API allows 20 KB
    timeout: float = 60.0

    @property
    def mode(self) -> str:
        if self.url:
            return "remote"
        if self.jar_dir:
            return "offline install"
        return "download cache"


# Offsets ---------------------------------------------------------------------------------


def utf16_length(text: str) -> int:
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def _utf16_to_index(text: str) -> dict[int, int]:
    """UTF-16 offset -> Python index, for every offset that starts a character (and the end)."""
    mapping: dict[int, int] = {}
    units = 0
    for index, char in enumerate(text):
        mapping[units] = index
        units += 2 if ord(char) > 0xFFFF else 1
    mapping[units] = len(text)
    return mapping


# Matches and corrections ----------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """One LanguageTool finding, with offsets in Python characters of its caption."""

    offset: int
    length: int
    replacements: tuple[str, ...]
    rule_id: str
    message: str
    category: str

    def as_dict(self, text: str) -> dict[str, Any]:
        return {
            "rule": self.rule_id,
            "category": self.category,
            "message": self.message,
            "offset": self.offset,
            "length": self.length,
            "original": text[self.offset : self.offset + self.length],
            "replacement": self.replacements[0] if self.replacements else None,
        }


@dataclass
class Correction:
    text: str  # after applying the matches
    applied: list[dict[str, Any]] = field(default_factory=list)
    ignored: list[dict[str, Any]] = field(default_factory=list)


def apply_matches(text: str, matches: Sequence[Match]) -> Correction:
    """Applies each match's first replacement, left to right. A match that overlaps one
    already applied, or that suggests nothing, is ignored and recorded with the reason."""
    applied: list[tuple[Match, dict[str, Any]]] = []
    ignored: list[dict[str, Any]] = []
    end = 0
    for match in sorted(matches, key=lambda m: (m.offset, -m.length)):
        record = match.as_dict(text)
        if not match.replacements:
            ignored.append({**record, "reason": "no replacement suggested"})
        elif match.offset < end:
            previous = applied[-1][0].rule_id
            ignored.append({**record, "reason": f"overlaps the correction by {previous}"})
        else:
            applied.append((match, record))
            end = match.offset + match.length
    pieces: list[str] = []
    cursor = 0
    for match, _ in applied:
        pieces.append(text[cursor : match.offset])
        pieces.append(match.replacements[0])
        cursor = match.offset + match.length
    pieces.append(text[cursor:])
    return Correction("".join(pieces), [record for _, record in applied], ignored)


def _parse_match(raw: Any, where: str) -> tuple[int, int, Match]:
    """(UTF-16 offset, UTF-16 length, match with those offsets still to convert)."""
    try:
        offset, length = raw["offset"], raw["length"]
        replacements = tuple(str(r["value"]) for r in raw.get("replacements") or [])
        rule = raw.get("rule") or {}
        rule_id = str(rule.get("id", ""))
        category = str((rule.get("category") or {}).get("id", ""))
        message = str(raw.get("message", ""))
    except (KeyError, TypeError, AttributeError) as exc:
        raise LanguageToolUnavailable(f"{where}: a match lacks {exc}") from exc
    if not isinstance(offset, int) or not isinstance(length, int) or offset < 0 or length < 0:
        raise LanguageToolUnavailable(f"{where}: a match has offset {offset!r}, length {length!r}")
    return offset, length, Match(offset, length, replacements, rule_id, message, category)


# The HTTP client -------------------------------------------------------------------------


class LanguageToolClient:
    """Checks many texts against one LanguageTool server's ``/v2/check``, batching them."""

    def __init__(
        self, config: Config, *, base_url: str = "", session: requests.Session | None = None
    ) -> None:
        self.config = config
        self.base_url = (base_url or config.url).rstrip("/")
        if not self.base_url:
            raise ValueError("LanguageToolClient needs a server URL")
        self.session = session or requests.Session()
        self.requests_sent = 0

    def check_many(self, texts: Sequence[str]) -> list[list[Match]]:
        """The matches of each text, in Python offsets of that text. Matches that cross
        from one text into the next (they should not) are dropped."""
        results: list[list[Match]] = [[] for _ in texts]
        for start, stop in self._batches(texts):
            self._check_batch(texts, start, stop, results)
        return results

    def correct_many(self, texts: Sequence[str]) -> list[Correction]:
        return [
            apply_matches(text, matches)
            for text, matches in zip(texts, self.check_many(texts), strict=True)
        ]

    def _batches(self, texts: Sequence[str]) -> list[tuple[int, int]]:
        batches: list[tuple[int, int]] = []
        start, size = 0, 0
        for index, text in enumerate(texts):
            grown = size + len(text) + len(SEPARATOR)
            if index > start and grown > self.config.max_chars:
                batches.append((start, index))
                start, grown = index, len(text) + len(SEPARATOR)
            size = grown
        if start < len(texts):
            batches.append((start, len(texts)))
        return batches

    def _check_batch(
        self, texts: Sequence[str], start: int, stop: int, results: list[list[Match]]
    ) -> None:
        chunk = texts[start:stop]
        joined = SEPARATOR.join(chunk)
        starts: list[int] = []  # UTF-16 offset where each text begins in `joined`
        units = 0
        for text in chunk:
            starts.append(units)
            units += utf16_length(text) + utf16_length(SEPARATOR)
        where = f"LanguageTool at {self.base_url}"
        for raw in self._post(joined).get("matches", []):
            offset, length, match = _parse_match(raw, where)
            position = bisect.bisect_right(starts, offset) - 1
            text = chunk[position]
            local = offset - starts[position]
            mapping = _utf16_to_index(text)
            first, last = mapping.get(local), mapping.get(local + length)
            if first is None or last is None:
                # crosses into the separator or the next caption, or splits a surrogate pair
                log.debug("%s: dropped a match at %d+%d across texts", where, offset, length)
                continue
            results[start + position].append(
                Match(
                    first,
                    last - first,
                    match.replacements,
                    match.rule_id,
                    match.message,
                    match.category,
                )
            )

    def _post(self, text: str) -> dict[str, Any]:
        url = f"{self.base_url}/v2/check"
        data = {"language": self.config.language, "text": text}
        if self.config.disabled_rules:
            data["disabledRules"] = ",".join(self.config.disabled_rules)
        try:
            response = self.session.post(url, data=data, timeout=self.config.timeout)
        except requests.RequestException as exc:
            raise LanguageToolUnavailable(
                f"LanguageTool at {self.base_url} unreachable: {exc}"
            ) from exc
        self.requests_sent += 1
        if response.status_code != 200:
            body = response.text[:200].strip()
            raise LanguageToolUnavailable(
                f"LanguageTool at {self.base_url} answered HTTP {response.status_code}: {body}"
            )
        try:
            payload = response.json()
        except ValueError as exc:
            raise LanguageToolUnavailable(
                f"LanguageTool at {self.base_url} answered something that is not JSON: {exc}"
            ) from exc
        if not isinstance(payload, dict) or not isinstance(payload.get("matches"), list):
            raise LanguageToolUnavailable(
                f"LanguageTool at {self.base_url} answered JSON without a 'matches' list"
            )
        return payload

    def close(self) -> None:
        self.session.close()


# Local servers through language-tool-python ----------------------------------------------

_local_lock = threading.Lock()
_local_servers: dict[tuple[str, bool, str], LanguageTool] = {}  # one per setup per process
_local_failures: dict[tuple[str, bool, str], tuple[float, str]] = {}


def client_for(config: Config) -> LanguageToolClient:
    """A client for the server the config names, starting a local one if needed (once per
    process). Raises LanguageToolUnavailable, with the reason, when there is none."""
    if config.url:
        return LanguageToolClient(config)
    return LanguageToolClient(config, base_url=_local_server_url(config))


def _local_server_url(config: Config) -> str:
    key = (config.jar_dir, config.download, config.language)
    with _local_lock:
        tool = _local_servers.get(key)
        if tool is not None and tool._server_is_alive():
            return str(tool.url).removesuffix("/").removesuffix("/v2")
        failed = _local_failures.get(key)
        if failed and time.monotonic() - failed[0] < RETRY_AFTER_SECONDS:
            raise LanguageToolUnavailable(failed[1])
        try:
            tool = _start_local(config)
        except LanguageToolUnavailable as exc:
            _local_failures[key] = (time.monotonic(), str(exc))
            raise
        except Exception as exc:  # language-tool-python: Java, download, port, zip errors
            reason = f"local LanguageTool ({config.mode}) failed to start: {exc}"
            _local_failures[key] = (time.monotonic(), reason)
            raise LanguageToolUnavailable(reason) from exc
        _local_failures.pop(key, None)
        _local_servers[key] = tool
        return str(tool.url).removesuffix("/").removesuffix("/v2")


def _start_local(config: Config) -> LanguageTool:
    import language_tool_python
    from language_tool_python.download_lt import LocalLanguageTool

    if config.jar_dir:
        folder, version = offline_install(config.jar_dir)
        # language-tool-python 3.4 skips the download when LTP_JAR_DIR_PATH is set, then
        # looks for "LanguageTool-<version>" inside LTP_PATH: point both at the install.
        os.environ["LTP_JAR_DIR_PATH"] = str(folder)
        os.environ["LTP_PATH"] = str(folder.parent)
    else:
        installed = LocalLanguageTool.get_latest_installed_version()
        if installed is not None:
            version = installed.version_name
        elif config.download:
            version = language_tool_python.download_lt.LTP_DOWNLOAD_VERSION
        else:
            raise LanguageToolUnavailable(
                f"no LanguageTool: LANGUAGETOOL_URL and LTP_JAR_DIR_PATH are not set and "
                f"{_cache_dir()} holds no downloaded copy (LANGUAGETOOL_DOWNLOAD=1 lets the "
                "first run download one)"
            )
    log.info("starting a local LanguageTool %s server (%s)", version, config.mode)
    return _local_tool_class()(config.language, language_tool_download_version=version)


def _local_tool_class() -> type[LanguageTool]:
    import language_tool_python
    from language_tool_python import server

    class LocalLanguageTool(language_tool_python.LanguageTool):
        """language-tool-python's LanguageTool, careful when its server will not start.

        On a server that exits at once (a broken jar, an old Java) language-tool-python
        tries the next port, up to 918 of them, and keeps every dead process in the list
        it kills by pid at exit, when those pids may belong to someone else. Here a few
        ports are tried (a taken port is worth one more try, a broken install is not) and
        a failed server is stopped and forgotten at once.
        """

        def _start_server_on_free_port(self) -> None:
            self._available_ports = self._available_ports[:2]
            super()._start_server_on_free_port()

        def _start_local_server(self) -> None:
            try:
                super()._start_local_server()
            except Exception:
                failed = self._server
                if failed is not None:
                    if failed.poll() is None:
                        failed.kill()
                    failed.wait(timeout=10)
                    if failed in server.RUNNING_SERVER_PROCESSES:
                        server.RUNNING_SERVER_PROCESSES.remove(failed)
                    self._server = None
                raise

    return LocalLanguageTool


def offline_install(jar_dir: str) -> tuple[Path, str]:
    """The install folder and its LanguageTool version, or LanguageToolUnavailable."""
    folder = Path(jar_dir).expanduser().resolve()
    if not folder.is_dir():
        raise LanguageToolUnavailable(f"LTP_JAR_DIR_PATH={jar_dir} is not a folder")
    named = _VERSIONED_DIR.match(folder.name)
    if not named:
        raise LanguageToolUnavailable(
            f"LTP_JAR_DIR_PATH={jar_dir}: the folder must keep its unzipped name "
            "LanguageTool-<version> (language-tool-python reads the version from it)"
        )
    if not any((folder / jar).is_file() for jar in ("languagetool-server.jar", "languagetool.jar")):
        raise LanguageToolUnavailable(
            f"LTP_JAR_DIR_PATH={jar_dir} holds no languagetool-server.jar or languagetool.jar"
        )
    return folder, named.group(1)


def _cache_dir() -> Path:
    return Path(os.environ.get("LTP_PATH") or Path.home() / ".cache" / "language_tool_python")


def describe(config: Config) -> tuple[bool, str]:
    """Whether LanguageTool is usable as configured, and a line saying how; starts nothing
    (a remote server gets one 3-second request)."""
    if config.url:
        try:
            response = requests.get(f"{config.url.rstrip('/')}/v2/languages", timeout=3)
            response.raise_for_status()
        except requests.RequestException as exc:
            return False, f"server at {config.url} unreachable: {exc}"
        return True, f"server at {config.url}"
    if config.jar_dir:
        try:
            folder, version = offline_install(config.jar_dir)
        except LanguageToolUnavailable as exc:
            return False, str(exc)
        return True, f"offline install of LanguageTool {version} in {folder}"
    cache = _cache_dir()
    copies = sorted(p.name for p in cache.glob("LanguageTool-*") if p.is_dir())
    if copies:
        return True, f"downloaded copy {copies[-1]} in {cache}"
    if config.download:
        return False, (
            f"not downloaded yet: the first post-processing run downloads LanguageTool "
            f"into {cache}; until then grammar correction is skipped"
        )
    return False, (
        "not available: set LANGUAGETOOL_URL or LTP_JAR_DIR_PATH (or LANGUAGETOOL_DOWNLOAD=1); "
        "grammar correction is skipped"
    )


def stop_local_servers() -> None:
    """Stops the local servers this process started (tests; language-tool-python also
    stops them at exit)."""
    with _local_lock:
        for tool in _local_servers.values():
            tool.close()
        _local_servers.clear()
        _local_failures.clear()
