"""A stand-in for Prolific's REST API on 127.0.0.1 (no network in tests).

It serves the calls annotation.platforms.prolific makes (studies, their transition to
published, submissions and their transitions, bonus set-up and payment, filters, the
user and workspace `prolific_check` reads), checks the `Authorization: Token …` header,
records every call, and can be told to fail a call (`fail`: path prefix -> HTTP status).

Participants act as on Prolific's site: `start` opens a place on a published study (a
submission ACTIVE, its id the SESSION_ID), `complete` brings the completion code back
(AWAITING REVIEW when it is the study's code), `give_back` returns it, `time_out` lets
its time run out. A study takes no more active or finished submissions than its places.

Participant groups are kept as Prolific keeps them (made in a workspace, members added
and removed at any time), and a study whose filters hold a `participant_group_blocklist`
is not shown to the members of its groups as they are when the participant tries to start
(`start` raises NotEligible), as Prolific updates such studies with the group.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "fake-prolific-token"
WORKSPACE = "WS0000000000000000000001"
COUNTRIES = {"0": "United Kingdom", "1": "United States", "2": "Canada", "3": "Australia"}
TAKING = ("ACTIVE", "AWAITING REVIEW", "APPROVED", "REJECTED")
Answer = tuple[int, Any]


class NotEligible(Exception):
    """Prolific does not show the study to this participant (a blocklist filter)."""


class Full(Exception):
    """Prolific shows the study to no one more: its places are taken."""


@dataclass
class FakeProlific:
    url: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    studies: dict[str, dict[str, Any]] = field(default_factory=dict)
    submissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    bonuses: dict[str, dict[str, Any]] = field(default_factory=dict)  # set-ups by id
    paid: list[str] = field(default_factory=list)  # set-up ids paid
    fail: dict[str, int] = field(default_factory=dict)  # path prefix -> HTTP status
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # participant groups
    members: dict[str, set[str]] = field(default_factory=dict)  # group id -> participant ids
    lock: threading.Lock = field(default_factory=threading.Lock)

    # what participants do on Prolific's site -----------------------------------------

    def start(self, study_id: str, participant_id: str) -> str:
        with self.lock:
            study = self.studies[study_id]
            assert study["status"] == "ACTIVE", study["status"]
            for wanted in study.get("filters", []):
                if wanted["filter_id"] != "participant_group_blocklist":
                    continue
                if any(participant_id in self.members[g] for g in wanted["selected_values"]):
                    raise NotEligible(participant_id)
            taken = [s for s in self.submissions.values() if s["study_id"] == study_id]
            if sum(s["status"] in TAKING for s in taken) >= study["total_available_places"]:
                raise Full(study_id)
            session = f"{len(self.submissions) + 1:024x}"
            self.submissions[session] = {
                "id": session,
                "study_id": study_id,
                "participant_id": participant_id,
                "status": "ACTIVE",
            }
            return session

    def complete(self, session: str, code: str) -> None:
        with self.lock:
            submission = self.submissions[session]
            study = self.studies[submission["study_id"]]
            assert code in [c["code"] for c in study["completion_codes"]], code
            submission["status"] = "AWAITING REVIEW"

    def give_back(self, session: str) -> None:
        with self.lock:
            self.submissions[session]["status"] = "RETURNED"

    def time_out(self, session: str) -> None:
        with self.lock:
            self.submissions[session]["status"] = "TIMED-OUT"

    def of(self, method: str, path: str) -> list[dict[str, Any]]:
        """The bodies of the calls made to `path` (a regular expression of the whole path)."""
        return [body for m, p, body in self.calls if m == method and re.fullmatch(path, p)]

    # the API ---------------------------------------------------------------------------

    def handle(self, method: str, path: str, body: dict[str, Any], token: str) -> Answer:
        with self.lock:
            self.calls.append((method, path, body))
            if token != f"Token {TOKEN}":
                return 401, {"error": {"detail": "Invalid token."}}
            for prefix, status in self.fail.items():
                if path.startswith(prefix):
                    return status, {"error": {"detail": f"{path} failed"}}
            parts = [p for p in path.split("/") if p]
            return self._route(method, parts, body)

    def _route(self, method: str, parts: list[str], body: dict[str, Any]) -> Answer:
        match method, parts:
            case "GET", ["users", "me"]:
                return 200, {"id": "USER1", "email": "researcher@example.org"}
            case "GET", ["workspaces", workspace]:
                if workspace != WORKSPACE:
                    return 404, {"error": {"detail": "Not found."}}
                return 200, {"id": WORKSPACE, "title": "Earmark"}
            case "GET", ["filters"]:
                return 200, {
                    "results": [
                        {"filter_id": "current-country-of-residence", "choices": COUNTRIES},
                        {"filter_id": "approval_rate", "type": "range"},
                    ]
                }
            case "POST", ["studies"]:
                return self._study_create(body)
            case "GET", ["studies", study_id]:
                found = self.studies.get(study_id)
                return (200, found) if found else (404, {"error": {"detail": "Not found."}})
            case "POST", ["studies", study_id, "transition"]:
                study = self.studies.get(study_id)
                if study is None or body.get("action") != "PUBLISH":
                    return 400, {"error": {"detail": "Bad transition."}}
                study["status"] = "ACTIVE"
                return 200, study
            case "GET", ["studies", study_id, "submissions"]:
                listed = [s for s in self.submissions.values() if s["study_id"] == study_id]
                return 200, {"results": listed}
            case "GET", ["submissions", session]:
                found = self.submissions.get(session)
                return (200, found) if found else (404, {"error": {"detail": "Not found."}})
            case "POST", ["submissions", "bonus-payments"]:
                return self._bonus_set_up(body)
            case "POST", ["submissions", session, "transition"]:
                return self._transition(session, body)
            case "POST", ["participant-groups"]:
                if not body.get("name") or not (
                    body.get("workspace_id") or body.get("organisation_id")
                ):
                    return 400, {"error": {"detail": "name and workspace_id are required"}}
                group_id = f"PG{len(self.groups) + 1:022d}"
                self.groups[group_id] = {**body, "id": group_id}
                self.members[group_id] = set(body.get("participant_ids", []))
                return 201, {**self.groups[group_id], "participant_count": 0}
            case ("GET" | "POST" | "DELETE") as verb, [
                "participant-groups",
                group_id,
                "participants",
            ]:
                if group_id not in self.members:
                    return 404, {"error": {"detail": "Not found."}}
                ids = body.get("participant_ids", [])
                if verb == "POST":
                    self.members[group_id].update(ids)
                elif verb == "DELETE":
                    self.members[group_id].difference_update(ids)
                listed = [{"participant_id": pid} for pid in sorted(self.members[group_id])]
                return 200, {"results": listed}
            case "POST", ["bulk-bonus-payments", set_up, "pay"]:
                if set_up not in self.bonuses or set_up in self.paid:
                    return 400, {"error": {"detail": "Nothing to pay."}}
                self.paid.append(set_up)
                return 202, {}
        return 404, {"error": {"detail": f"No route {method} {parts}"}}

    def _study_create(self, body: dict[str, Any]) -> Answer:
        missing = [
            name
            for name in (
                "name",
                "description",
                "external_study_url",
                "completion_codes",
                "total_available_places",
                "estimated_completion_time",
                "reward",
            )
            if not body.get(name)
        ]
        if missing:
            return 400, {"error": {"detail": f"missing {missing}"}}
        study_id = f"{len(self.studies) + 1:024x}"
        self.studies[study_id] = {**body, "id": study_id, "status": "UNPUBLISHED"}
        return 201, self.studies[study_id]

    def _transition(self, session: str, body: dict[str, Any]) -> Answer:
        submission = self.submissions.get(session)
        if submission is None:
            return 404, {"error": {"detail": "Not found."}}
        if submission["status"] != "AWAITING REVIEW":
            return 400, {"error": {"detail": f"Submission is {submission['status']}."}}
        if body.get("action") == "APPROVE":
            submission["status"] = "APPROVED"
        elif body.get("action") == "REJECT":
            if len(body.get("message", "")) < 100 or not body.get("rejection_category"):
                return 400, {"error": {"detail": "A rejection needs a message and category."}}
            submission.update(status="REJECTED", rejection_category=body["rejection_category"])
        else:
            return 400, {"error": {"detail": "Unknown action."}}
        return 200, submission

    def _bonus_set_up(self, body: dict[str, Any]) -> Answer:
        study_id = body.get("study_id", "")
        rows = [line.split(",") for line in body.get("csv_bonuses", "").splitlines() if line]
        in_study = {
            s["participant_id"] for s in self.submissions.values() if s["study_id"] == study_id
        }
        if not rows or any(pid not in in_study for pid, _ in rows):
            return 400, {"error": {"detail": "Participants not in the study."}}
        set_up = f"BONUS{len(self.bonuses) + 1:019d}"
        amount = sum(round(float(value) * 100) for _, value in rows)
        self.bonuses[set_up] = {"id": set_up, "study": study_id, "amount": amount, "rows": rows}
        return 201, self.bonuses[set_up]


@contextmanager
def fake_prolific() -> Iterator[FakeProlific]:
    fake = FakeProlific()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            path = self.path.split("?", 1)[0].removeprefix("/api/v1")
            status, answer = fake.handle(method, path, body, self.headers.get("Authorization", ""))
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def do_DELETE(self) -> None:
            self._answer("DELETE")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_port}/api/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


SITE = "https://earmark.example.org"
COMPLETE = "https://app.prolific.com/submissions/complete"


@contextmanager
def prolific_configured(settings: Any) -> Iterator[FakeProlific]:
    """The fake Prolific, with the settings pointing at it (pytest-django's `settings`):
    pounds, a £6.00 minimum hourly rate."""
    with fake_prolific() as fake:
        settings.PROLIFIC_API_URL = fake.url
        settings.PROLIFIC_TOKEN = TOKEN
        settings.PROLIFIC_WORKSPACE_ID = WORKSPACE
        settings.PROLIFIC_EXTERNAL_URL = SITE
        settings.PROLIFIC_COMPLETE_URL = COMPLETE
        settings.PROLIFIC_CURRENCY = "GBP"
        settings.PROLIFIC_MIN_HOURLY_CENTS = 600
        yield fake
