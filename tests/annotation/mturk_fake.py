"""A stand-in for the MTurk requester API on 127.0.0.1 (moto has no MTurk).

It speaks the JSON protocol boto3 uses for MTurk (AWS JSON 1.1: POST / with
`X-Amz-Target: MTurkRequesterServiceV20170117.<Operation>`) for the operations
annotation.mturk calls, records every call, and can be told to refuse an operation after
a number of successes. Signatures are not checked.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PREFIX = "MTurkRequesterServiceV20170117."


@dataclass
class FakeMTurk:
    url: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    hit_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    hits: dict[str, dict[str, Any]] = field(default_factory=dict)  # by HITId
    by_token: dict[str, str] = field(default_factory=dict)  # UniqueRequestToken -> HITId
    reviews: dict[str, str] = field(default_factory=dict)  # AssignmentId -> decision
    # AssignmentId -> AssignmentStatus for GetAssignment (Submitted when not set)
    statuses: dict[str, str] = field(default_factory=dict)
    # HITId -> NumberOfAssignmentsPending for GetHIT (0 when not set)
    pending: dict[str, int] = field(default_factory=dict)
    # HITId -> AssignmentIds submitted there, for ListAssignmentsForHIT (statuses above)
    listed: dict[str, list[str]] = field(default_factory=dict)
    # operation -> successes still allowed before it answers with a RequestError
    refuse_after: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, operation: str) -> list[dict[str, Any]]:
        return [body for name, body in self.calls if name == operation]

    def handle(self, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.calls.append((operation, body))
            if operation in self.refuse_after:
                if self.refuse_after[operation] <= 0:
                    return 400, {"__type": "RequestError", "Message": f"{operation} refused"}
                self.refuse_after[operation] -= 1
            return getattr(self, f"_{operation}")(body)

    def _CreateHITType(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        type_id = f"TYPE{len(self.hit_types) + 1:016d}"
        self.hit_types[type_id] = body
        return 200, {"HITTypeId": type_id}

    def _CreateHITWithHITType(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body["HITTypeId"] not in self.hit_types:
            return 400, {"__type": "RequestError", "Message": "No such HIT type."}
        token = body.get("UniqueRequestToken", "")
        if token in self.by_token:  # MTurk's idempotency: the same request, the same HIT
            return 200, {"HIT": self.hits[self.by_token[token]]}
        hit_id = f"HIT{len(self.hits) + 1:017d}"
        hit = {"HITId": hit_id, "HITTypeId": body["HITTypeId"], **body}
        self.hits[hit_id] = hit
        if token:
            self.by_token[token] = hit_id
        return 200, {"HIT": hit}

    def _ApproveAssignment(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.statuses.get(body["AssignmentId"], "Submitted") != "Submitted":
            message = "This operation can be called with a status of: Submitted"
            return 400, {"__type": "RequestError", "Message": message}
        self.reviews[body["AssignmentId"]] = "approved"
        return 200, {}

    def _GetAssignment(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status = self.statuses.get(body["AssignmentId"], "Submitted")
        return 200, {"Assignment": {"AssignmentId": body["AssignmentId"],
                                    "AssignmentStatus": status}}  # fmt: skip

    def _GetHIT(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body["HITId"] not in self.hits:
            return 400, {"__type": "RequestError", "Message": "No such HIT."}
        hit = {**self.hits[body["HITId"]],
               "NumberOfAssignmentsPending": self.pending.get(body["HITId"], 0)}  # fmt: skip
        return 200, {"HIT": hit}

    def _ListAssignmentsForHIT(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Two per page, so callers must follow NextToken."""
        ids = self.listed.get(body["HITId"], [])
        start = int(body.get("NextToken") or 0)
        page = [
            {"AssignmentId": a, "HITId": body["HITId"],
             "AssignmentStatus": self.statuses.get(a, "Submitted")}
            for a in ids[start : start + 2]
        ]  # fmt: skip
        answer: dict[str, Any] = {"NumResults": len(page), "Assignments": page}
        if start + 2 < len(ids):
            answer["NextToken"] = str(start + 2)
        return 200, answer

    def _RejectAssignment(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if not body.get("RequesterFeedback"):
            return 400, {"__type": "ValidationException", "Message": "RequesterFeedback"}
        self.reviews[body["AssignmentId"]] = "rejected"
        return 200, {}


@contextmanager
def fake_mturk() -> Iterator[FakeMTurk]:
    fake = FakeMTurk()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            target = self.headers.get("X-Amz-Target", "")
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            operation = target.removeprefix(PREFIX)
            if not target.startswith(PREFIX) or not hasattr(fake, f"_{operation}"):
                status, answer = 400, {"__type": "UnknownOperationException", "Message": target}
            else:
                status, answer = fake.handle(operation, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
