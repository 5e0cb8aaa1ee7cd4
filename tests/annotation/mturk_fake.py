"""A stand-in for the MTurk requester API on 127.0.0.1 (moto has no MTurk).

It speaks the JSON protocol boto3 uses for MTurk (AWS JSON 1.1: POST / with
`X-Amz-Target: MTurkRequesterServiceV20170117.<Operation>`) for the operations
annotation.platforms.mturk calls, records every call, and can be told to refuse an operation after
a number of successes. Signatures are not checked.

Assignments live as on MTurk: a worker accepts one (accept), works on it, and either
submits it from the HIT page (submit) or returns it or lets its time run out there
(give_back), after which MTurk forgets it. As MTurk does, GetAssignment answers only for
submitted, approved and rejected assignments: one in progress gets a RequestError saying
which statuses the operation serves, an unknown one a RequestError saying it does not
exist. GetHIT counts the assignments in progress (NumberOfAssignmentsPending) and
ListAssignmentsForHIT lists the finished ones.

As MTurk does, accept refuses a worker who misses the HIT type's QualificationRequirements:
the system ones (approval rate, approved HITs, Worker_Locale) read the worker's record
(`workers`: a worker not listed is a US worker with a long, clean record), and a type of
ours is met once the requester granted it; a worker the requester blocked
(CreateWorkerBlock) accepts nothing. A worker takes a qualification type's test
(take_test): MTurk keeps the answers as a pending request until the requester accepts
(grants) or rejects it.

Bonuses (SendBonus) go to a worker on one of their finished assignments, once per
UniqueRequestToken (a repeated token pays nothing more, as MTurk's retry guarantee says);
ListBonusPayments lists them by HIT or assignment. pay_bonus records a payment made
outside Earmark (on MTurk's site, by another tool).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape

PREFIX = "MTurkRequesterServiceV20170117."
IN_PROGRESS = "Accepted"  # the fake's name for a state MTurk's API never names
FINISHED = ("Submitted", "Approved", "Rejected")
# what MTurk answers GetAssignment for an assignment still in progress
NOT_FINISHED_MESSAGE = "This operation can be called with a status of: Reviewable,Approved,Rejected"

Answer = tuple[int, dict[str, Any]]


def _request_error(message: str) -> Answer:
    return 400, {"__type": "RequestError", "Message": f"{message} (1700000000000)"}


# MTurk's system qualification types
PERCENT_APPROVED = "000000000000000000L0"
NUMBER_APPROVED = "00000000000000000040"
WORKER_LOCALE = "00000000000000000071"
ANSWERS_XMLNS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/"
    "QuestionFormAnswers.xsd"
)


class NotQualified(Exception):
    """MTurk does not let this worker accept the HIT."""


@dataclass
class FakeWorker:
    """A worker's record on MTurk, as its system qualifications read it."""

    country: str = "US"
    percent_approved: int = 100
    hits_approved: int = 100_000


def _compares(value: Any, requirement: dict[str, Any]) -> bool:
    comparator = requirement["Comparator"]
    wanted = requirement.get("IntegerValues", [None])[0]
    if comparator == "Exists":
        return True
    if comparator == "GreaterThanOrEqualTo":
        return bool(value >= wanted)
    if comparator == "GreaterThan":
        return bool(value > wanted)
    if comparator == "In":
        return value in [locale["Country"] for locale in requirement["LocaleValues"]]
    raise AssertionError(f"the fake knows no comparator {comparator!r}")


@dataclass
class FakeAssignment:
    hit_id: str
    worker_id: str
    status: str = IN_PROGRESS


@dataclass
class FakeMTurk:
    url: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    hit_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    hits: dict[str, dict[str, Any]] = field(default_factory=dict)  # by HITId
    by_token: dict[str, str] = field(default_factory=dict)  # UniqueRequestToken -> HITId
    reviews: dict[str, str] = field(default_factory=dict)  # AssignmentId -> decision
    assignments: dict[str, FakeAssignment] = field(default_factory=dict)  # by AssignmentId
    workers: dict[str, FakeWorker] = field(default_factory=dict)  # by WorkerId
    qualification_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    # by QualificationRequestId: the type, the worker, the answers, the status
    qualification_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    granted: dict[tuple[str, str], int] = field(default_factory=dict)  # (type, worker): value
    blocked: dict[str, str] = field(default_factory=dict)  # WorkerId -> the block's reason
    # BonusPayments as ListBonusPayments gives them, each with the HITId it listed under
    bonuses: list[dict[str, Any]] = field(default_factory=list)
    bonus_tokens: set[str] = field(default_factory=set)
    # operation -> successes still allowed before it answers with a RequestError
    refuse_after: dict[str, int] = field(default_factory=dict)
    # operation -> successes still allowed before it answers with a ServiceFault (MTurk's
    # own trouble, which a caller may retry)
    fail_after: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # what workers do on MTurk's site -------------------------------------------------

    def accept(self, hit_id: str, assignment_id: str, worker_id: str) -> None:
        with self.lock:
            if worker_id in self.blocked:  # MTurk hides a blocking requester's HITs
                raise NotQualified(f"{worker_id} is blocked: {self.blocked[worker_id]}")
            if unmet := self.unmet(hit_id, worker_id):
                raise NotQualified(f"{worker_id} misses {unmet}")
            self.assignments[assignment_id] = FakeAssignment(hit_id, worker_id)

    def unmet(self, hit_id: str, worker_id: str) -> list[str]:
        """The qualification types of the HIT's requirements the worker does not meet."""
        if hit_id not in self.hits:  # a HIT of another requester's
            return []
        hit_type = self.hit_types[self.hits[hit_id]["HITTypeId"]]
        worker = self.workers.get(worker_id, FakeWorker())
        record: dict[str, Any] = {
            PERCENT_APPROVED: worker.percent_approved,
            NUMBER_APPROVED: worker.hits_approved,
            WORKER_LOCALE: worker.country,
        }
        missed = []
        for requirement in hit_type.get("QualificationRequirements", []):
            type_id = requirement["QualificationTypeId"]
            value = record.get(type_id, self.granted.get((type_id, worker_id)))
            met = value is not None and _compares(value, requirement)
            if not met:
                missed.append(type_id)
        return missed

    def take_test(self, type_id: str, worker_id: str, answers: dict[str, str]) -> str:
        """The worker answers the type's test on MTurk: a pending request, by its id."""
        xml = "".join(
            f"<Answer><QuestionIdentifier>{escape(question)}</QuestionIdentifier>"
            f"<FreeText>{escape(text)}</FreeText></Answer>"
            for question, text in answers.items()
        )
        with self.lock:
            request_id = f"QREQ{len(self.qualification_requests) + 1:016d}"
            self.qualification_requests[request_id] = {
                "QualificationRequestId": request_id,
                "QualificationTypeId": type_id,
                "WorkerId": worker_id,
                "Answer": f'<QuestionFormAnswers xmlns="{ANSWERS_XMLNS}">{xml}'
                "</QuestionFormAnswers>",
                "SubmitTime": 1_700_000_000.0,
                "Status": "Pending",
            }
        return request_id

    def submit(self, assignment_id: str) -> None:
        """The worker's browser posts the assignment to turkSubmitTo's externalSubmit."""
        with self.lock:
            assert self.assignments[assignment_id].status == IN_PROGRESS
            self.assignments[assignment_id].status = "Submitted"

    def give_back(self, assignment_id: str) -> None:
        """Returned by its worker, or abandoned (its time ran out): MTurk forgets it."""
        with self.lock:
            del self.assignments[assignment_id]

    def set_status(self, assignment_id: str, status: str) -> None:
        """A decision MTurk took itself, such as its auto-approval."""
        with self.lock:
            self.assignments[assignment_id].status = status

    def pay_bonus(self, assignment_id: str, amount: str, reason: str) -> None:
        """A bonus paid on MTurk without Earmark (its site, another tool)."""
        with self.lock:
            found = self.assignments[assignment_id]
            self.bonuses.append(
                {
                    "WorkerId": found.worker_id,
                    "BonusAmount": amount,
                    "AssignmentId": assignment_id,
                    "Reason": reason,
                    "GrantTime": 1_700_000_000.0,
                    "HITId": found.hit_id,
                }
            )

    # the requester API -----------------------------------------------------------------

    def of(self, operation: str) -> list[dict[str, Any]]:
        return [body for name, body in self.calls if name == operation]

    def handle(self, operation: str, body: dict[str, Any]) -> Answer:
        with self.lock:
            self.calls.append((operation, body))
            if operation in self.refuse_after:
                if self.refuse_after[operation] <= 0:
                    return _request_error(f"{operation} refused")
                self.refuse_after[operation] -= 1
            if operation in self.fail_after:
                if self.fail_after[operation] <= 0:
                    return 500, {"__type": "ServiceFault", "Message": "MTurk is unavailable"}
                self.fail_after[operation] -= 1
            answer: Answer = getattr(self, f"_{operation}")(body)
            return answer

    def _CreateHITType(self, body: dict[str, Any]) -> Answer:
        type_id = f"TYPE{len(self.hit_types) + 1:016d}"
        self.hit_types[type_id] = body
        return 200, {"HITTypeId": type_id}

    def _CreateQualificationType(self, body: dict[str, Any]) -> Answer:
        if any(t["Name"] == body["Name"] for t in self.qualification_types.values()):
            return _request_error("You have already created a QualificationType with this name.")
        type_id = f"QTYPE{len(self.qualification_types) + 1:015d}"
        self.qualification_types[type_id] = body
        return 200, {"QualificationType": {"QualificationTypeId": type_id, **body}}

    def _ListQualificationRequests(self, body: dict[str, Any]) -> Answer:
        """Pending requests of the type, two per page, so callers must follow NextToken."""
        pending = [
            {k: v for k, v in r.items() if k != "Status"}
            for r in self.qualification_requests.values()
            if r["QualificationTypeId"] == body["QualificationTypeId"] and r["Status"] == "Pending"
        ]
        start = int(body.get("NextToken") or 0)
        answer: dict[str, Any] = {
            "NumResults": len(pending[start : start + 2]),
            "QualificationRequests": pending[start : start + 2],
        }
        if start + 2 < len(pending):
            answer["NextToken"] = str(start + 2)
        return 200, answer

    def _pending_request(self, request_id: str) -> dict[str, Any] | Answer:
        found = self.qualification_requests.get(request_id)
        if found is None or found["Status"] != "Pending":
            return _request_error(f"QualificationRequest {request_id} is not pending.")
        return found

    def _AcceptQualificationRequest(self, body: dict[str, Any]) -> Answer:
        found = self._pending_request(body["QualificationRequestId"])
        if isinstance(found, tuple):
            return found
        found["Status"] = "Approved"
        key = (found["QualificationTypeId"], found["WorkerId"])
        self.granted[key] = body.get("IntegerValue", 1)
        return 200, {}

    def _RejectQualificationRequest(self, body: dict[str, Any]) -> Answer:
        found = self._pending_request(body["QualificationRequestId"])
        if isinstance(found, tuple):
            return found
        found["Status"] = "Rejected"
        return 200, {}

    def _CreateHITWithHITType(self, body: dict[str, Any]) -> Answer:
        if body["HITTypeId"] not in self.hit_types:
            return _request_error("No such HIT type.")
        token = body.get("UniqueRequestToken", "")
        if token in self.by_token:  # MTurk's idempotency: the same request, the same HIT
            return 200, {"HIT": self.hits[self.by_token[token]]}
        hit_id = f"HIT{len(self.hits) + 1:017d}"
        hit = {"HITId": hit_id, "HITTypeId": body["HITTypeId"], **body}
        self.hits[hit_id] = hit
        if token:
            self.by_token[token] = hit_id
        return 200, {"HIT": hit}

    def _finished(self, assignment_id: str) -> FakeAssignment | Answer:
        found = self.assignments.get(assignment_id)
        if found is None:
            return _request_error(f"Assignment {assignment_id} does not exist.")
        if found.status not in FINISHED:
            return _request_error(NOT_FINISHED_MESSAGE)
        return found

    def _decide(self, body: dict[str, Any], status: str) -> Answer:
        found = self._finished(body["AssignmentId"])
        if isinstance(found, tuple):
            return found
        if found.status != "Submitted":
            return _request_error("This operation can be called with a status of: Submitted")
        found.status = status
        self.reviews[body["AssignmentId"]] = status.lower()
        return 200, {}

    def _ApproveAssignment(self, body: dict[str, Any]) -> Answer:
        return self._decide(body, "Approved")

    def _RejectAssignment(self, body: dict[str, Any]) -> Answer:
        if not body.get("RequesterFeedback"):
            return 400, {"__type": "ValidationException", "Message": "RequesterFeedback"}
        return self._decide(body, "Rejected")

    def _CreateWorkerBlock(self, body: dict[str, Any]) -> Answer:
        if not body.get("Reason"):
            return 400, {"__type": "ValidationException", "Message": "Reason"}
        self.blocked[body["WorkerId"]] = body["Reason"]
        return 200, {}

    def _DeleteWorkerBlock(self, body: dict[str, Any]) -> Answer:
        self.blocked.pop(body["WorkerId"], None)  # as MTurk: lifting no block is no error
        return 200, {}

    def _SendBonus(self, body: dict[str, Any]) -> Answer:
        for name in ("WorkerId", "BonusAmount", "AssignmentId", "Reason"):
            if not body.get(name):
                return 400, {"__type": "ValidationException", "Message": name}
        found = self._finished(body["AssignmentId"])
        if isinstance(found, tuple):
            return found
        if found.worker_id != body["WorkerId"]:
            return _request_error(
                f"Assignment {body['AssignmentId']} is not worker {body['WorkerId']}'s."
            )
        token = body.get("UniqueRequestToken", "")
        if token and token in self.bonus_tokens:  # the same request again: paid once
            return 200, {}
        if token:
            self.bonus_tokens.add(token)
        self.bonuses.append(
            {
                "WorkerId": body["WorkerId"],
                "BonusAmount": body["BonusAmount"],
                "AssignmentId": body["AssignmentId"],
                "Reason": body["Reason"],
                "GrantTime": 1_700_000_000.0,
                "HITId": found.hit_id,
            }
        )
        return 200, {}

    def _ListBonusPayments(self, body: dict[str, Any]) -> Answer:
        """By HITId or AssignmentId (exactly one), two per page: callers follow NextToken."""
        if bool(body.get("HITId")) == bool(body.get("AssignmentId")):
            return _request_error("Specify either a HITId or an AssignmentId.")
        key = "HITId" if body.get("HITId") else "AssignmentId"
        found = [
            {k: v for k, v in b.items() if k != "HITId"}
            for b in self.bonuses
            if b[key] == body[key]
        ]
        start = int(body.get("NextToken") or 0)
        page = found[start : start + 2]
        answer: dict[str, Any] = {"NumResults": len(page), "BonusPayments": page}
        if start + 2 < len(found):
            answer["NextToken"] = str(start + 2)
        return 200, answer

    def _GetAssignment(self, body: dict[str, Any]) -> Answer:
        found = self._finished(body["AssignmentId"])
        if isinstance(found, tuple):
            return found
        assignment = {
            "AssignmentId": body["AssignmentId"],
            "HITId": found.hit_id,
            "WorkerId": found.worker_id,
            "AssignmentStatus": found.status,
        }
        return 200, {"Assignment": assignment, "HIT": self.hits.get(found.hit_id, {})}

    def _GetHIT(self, body: dict[str, Any]) -> Answer:
        if body["HITId"] not in self.hits:
            return _request_error("No such HIT.")
        pending = sum(
            a.hit_id == body["HITId"] and a.status == IN_PROGRESS for a in self.assignments.values()
        )
        return 200, {"HIT": {**self.hits[body["HITId"]], "NumberOfAssignmentsPending": pending}}

    def _ListAssignmentsForHIT(self, body: dict[str, Any]) -> Answer:
        """Two per page, so callers must follow NextToken."""
        ids = [
            assignment_id
            for assignment_id, a in self.assignments.items()
            if a.hit_id == body["HITId"] and a.status in FINISHED
        ]
        start = int(body.get("NextToken") or 0)
        page = [
            {
                "AssignmentId": assignment_id,
                "HITId": body["HITId"],
                "WorkerId": self.assignments[assignment_id].worker_id,
                "AssignmentStatus": self.assignments[assignment_id].status,
            }
            for assignment_id in ids[start : start + 2]
        ]
        answer: dict[str, Any] = {"NumResults": len(page), "Assignments": page}
        if start + 2 < len(ids):
            answer["NextToken"] = str(start + 2)
        return 200, answer


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
