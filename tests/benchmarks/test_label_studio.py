"""benchmarks/_label_studio.py without Label Studio: the annotator's request sequence against
a tiny fake server on 127.0.0.1, as load_claim_submit.py's worker runs it, and the checks
on the venv and the environment."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.asyncrun import run_async

# the scripts import their siblings through their folder (see test_load_claim_submit.py)
sys.path.append(str(Path(__file__).resolve().parents[2] / "benchmarks"))

import _label_studio
from _deployment import LoopFailed, NoWork
from load_claim_submit import Level, _worker


class FakeLabelStudio(ThreadingHTTPServer):
    """Answers next task / audio / annotation as Label Studio does, records every request;
    `next_status` and `annotate_status` make it answer otherwise."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, str, str, Any]] = []
        self.next_status = 200
        self.annotate_status = 201
        self.tasks = iter(range(101, 10_000))


class Handler(BaseHTTPRequestHandler):
    server: FakeLabelStudio

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self, body: Any = None) -> None:
        self.server.requests.append(
            (self.command, self.path, self.headers.get("Authorization", ""), body)
        )

    def do_GET(self) -> None:
        self._record()
        if self.path == "/api/projects/7/next":
            if self.server.next_status != 200:
                self._answer(self.server.next_status, b'{"detail": "no"}')
                return
            task = {"id": next(self.server.tasks), "data": {"audio": "/data/upload/7/a.wav"}}
            self._answer(200, json.dumps(task).encode())
        elif self.path == "/data/upload/7/a.wav":
            self._answer(200, b"RIFF....WAVE", "audio/wav")
        else:
            self._answer(404, b"{}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self._record(json.loads(self.rfile.read(length)))
        if self.path.startswith("/api/tasks/") and self.path.endswith("/annotations/"):
            self._answer(self.server.annotate_status, b'{"id": 1}')
        else:
            self._answer(404, b"{}")


@pytest.fixture
def fake() -> Iterator[FakeLabelStudio]:
    server = FakeLabelStudio()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _once(fake: FakeLabelStudio, number: int = 0) -> float:
    """One Label Studio loop of worker `number` against the fake."""
    import aiohttp

    async def go() -> float:
        loop = _label_studio.loop(["tok-a", "tok-b"], 7)
        base = f"http://127.0.0.1:{fake.server_address[1]}"
        async with aiohttp.ClientSession(base) as session:
            return await loop(session, number)

    return run_async(go())


def test_a_loop_is_next_task_then_its_audio_then_the_annotation(fake: FakeLabelStudio) -> None:
    _once(fake)

    assert [(method, path) for method, path, _, _ in fake.requests] == [
        ("GET", "/api/projects/7/next"),
        ("GET", "/data/upload/7/a.wav"),
        ("POST", "/api/tasks/101/annotations/"),
    ]
    assert {auth for _, _, auth, _ in fake.requests} == {"Token tok-a"}
    body = fake.requests[2][3]
    assert body["result"][0]["from_name"] == "caption"
    assert body["result"][0]["to_name"] == "audio"
    assert body["result"][0]["type"] == "textarea"
    assert body["result"][0]["value"]["text"][0]


def test_each_worker_annotates_as_its_own_annotator(fake: FakeLabelStudio) -> None:
    _once(fake, 1)

    assert {auth for _, _, auth, _ in fake.requests} == {"Token tok-b"}


def test_no_task_left_is_no_work(fake: FakeLabelStudio) -> None:
    fake.next_status = 404

    with pytest.raises(NoWork):
        _once(fake)


def test_a_refused_next_task_is_an_error_named_by_its_request(fake: FakeLabelStudio) -> None:
    fake.next_status = 401

    with pytest.raises(LoopFailed, match=r"^next 401$"):
        _once(fake)


def test_a_refused_annotation_is_an_error_named_by_its_request(fake: FakeLabelStudio) -> None:
    fake.annotate_status = 400

    with pytest.raises(LoopFailed, match=r"^annotate 400$"):
        _once(fake)


def test_the_load_tests_worker_counts_label_studio_loops(fake: FakeLabelStudio) -> None:
    import aiohttp

    async def go() -> Level:
        level = Level(workers=2)
        loop = _label_studio.loop(["tok-a", "tok-b"], 7)
        base = f"http://127.0.0.1:{fake.server_address[1]}"
        async with aiohttp.ClientSession(base) as session:
            deadline = time.perf_counter() + 1.0
            await asyncio.gather(*(_worker(session, loop, level, deadline, i, 0.0) for i in (0, 1)))
        return level

    level = run_async(go())

    annotations = [path for method, path, _, _ in fake.requests if method == "POST"]
    assert level.loops == len(annotations) > 0
    assert not level.errors


def test_a_venv_without_label_studio_is_refused_with_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"no Label Studio in this venv.*label-studio==1\.23\.2"):
        _label_studio.package_dir(tmp_path)


def test_label_studio_runs_on_its_own_database_with_debug_off(tmp_path: Path) -> None:
    env = _label_studio.environment(
        server="postgres://bench:pw@db.local:5433", database="ls_bench", data_dir=tmp_path
    )

    assert (env["POSTGRE_NAME"], env["POSTGRE_USER"], env["POSTGRE_PASSWORD"]) == (
        "ls_bench",
        "bench",
        "pw",
    )
    assert (env["POSTGRE_HOST"], env["POSTGRE_PORT"]) == ("db.local", "5433")
    assert env["DEBUG"] == "false"
    assert "DATABASE_URL" not in env
