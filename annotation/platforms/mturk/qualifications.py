"""MTurk mode's qualification tests, after the HIT type requires them (publish.py
makes the MTurk qualification type of each test a batch requires, with the test as its
QuestionForm): MTurk holds each worker's answers as a qualification request, which
mturk_qualification_requests_import brings here as the worker's attempt; a reviewer
grades it as any other, and mturk_qualification_grades_send sends the grade back
(AcceptQualificationRequest grants the qualification; RejectQualificationRequest tells the
worker why, and the type's retry delay lets them try again). The captions are free text,
so no answer key could grade them on MTurk. Only worker ids MTurk verified reach us, in
its qualification requests.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any
from xml.etree import ElementTree

from botocore.exceptions import BotoCoreError, ClientError
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import PlatformRef
from annotation.platforms import refs
from annotation.platforms.mturk.client import MTURK, Kind, mturk_client, mturk_error
from annotation.platforms.mturk.publish import question_id
from annotation.platforms.mturk.workers import mturk_worker
from annotation.services import caption_problem
from crowd.models import Qualification, QualificationAnswer, QualificationAttempt

MAX_REASON_CHARS = 1024

logger = logging.getLogger(__name__)


# Requests in, grades out -------------------------------------------------------------------


def _answers(answer_xml: str, clip_ids: list[int]) -> dict[int, str]:
    """The free-text answers of MTurk's QuestionFormAnswers, by clip id of the test."""
    by_question = {question_id(clip_id): clip_id for clip_id in clip_ids}
    texts: dict[int, str] = {}
    try:
        root = ElementTree.fromstring(answer_xml)
    except ElementTree.ParseError:
        return texts
    for answer in root.iter():
        if answer.tag.rsplit("}", 1)[-1] != "Answer":
            continue
        fields = {child.tag.rsplit("}", 1)[-1]: (child.text or "") for child in answer}
        clip_id = by_question.get(fields.get("QuestionIdentifier", "").strip())
        if clip_id is not None:
            texts[clip_id] = fields.get("FreeText", "").strip()
    return texts


def _requests(client: Any, type_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"QualificationTypeId": type_id, "MaxResults": 100}
    while True:
        page = client.list_qualification_requests(**kwargs)
        found.extend(page.get("QualificationRequests", []))
        if not page.get("NextToken") or not page.get("QualificationRequests"):
            return found
        kwargs["NextToken"] = page["NextToken"]


def _attempt_import(
    qualification: Qualification, request: dict[str, Any], clip_ids: list[int]
) -> bool:
    """The request as the MTurk worker's attempt, waiting for a reviewer; False when the
    worker already has one in review or passed (MTurk asks again only after a grade)."""
    submitted = request.get("SubmitTime")
    texts = _answers(str(request.get("Answer", "")), clip_ids)
    # The one text gate, as on the local test page: there a refused answer is never
    # stored and the worker fixes it; here MTurk already took it, so the attempt arrives
    # graded "not passed" with the rule's message (sent back by
    # RejectQualificationRequest, the type's retry delay lets the worker try again), and
    # a refused answer is kept out of the database as the page would keep it out.
    refusals = []
    for number, clip_id in enumerate(clip_ids, start=1):
        problem = caption_problem(
            texts.get(clip_id, ""),
            min_words=qualification.min_words,
            max_words=qualification.max_words,
        )
        if problem:
            refusals.append(f"The caption for clip {number} {problem}.")
            texts[clip_id] = ""
    now = timezone.now()
    try:
        with transaction.atomic():
            worker = mturk_worker(worker_id=request["WorkerId"], project=qualification.project)
            attempt = QualificationAttempt.objects.create(
                qualification=qualification,
                worker=worker,
                submitted_at=submitted if isinstance(submitted, datetime) else now,
                **(
                    {
                        "state": QualificationAttempt.State.REJECTED,
                        "reviewed_at": now,
                        "feedback": " ".join(refusals)[:MAX_REASON_CHARS],
                    }
                    if refusals
                    else {}
                ),
            )
            refs.ref_create(
                platform=MTURK,
                kind=Kind.ATTEMPT,
                row=attempt,
                external=request["QualificationRequestId"],
            )
            QualificationAnswer.objects.bulk_create(
                QualificationAnswer(attempt=attempt, clip_id=clip_id, text=texts.get(clip_id, ""))
                for clip_id in clip_ids
            )
    except IntegrityError:
        return False
    return True


def mturk_qualification_requests_import(*, client: Any = None) -> dict[str, int]:
    """Brings MTurk workers' test answers (pending qualification requests of our types)
    here as attempts for reviewers to grade; a request already brought is skipped."""
    counts = {"imported": 0, "skipped": 0, "failed": 0}
    types = dict(
        refs.refs(platform=MTURK, kind=Kind.QUALIFICATION).values_list("local_id", "external_id")
    )
    tests = Qualification.objects.filter(pk__in=list(types)).select_related("project")
    for qualification in tests.order_by("pk"):
        client = client or mturk_client()
        try:
            requests = _requests(client, types[qualification.pk])
        except (ClientError, BotoCoreError) as exc:  # asked again on the next run
            logger.warning(
                "MTurk did not list the requests of %s: %s", qualification, mturk_error(exc)
            )
            counts["failed"] += 1
            continue
        known = set(
            refs.refs(platform=MTURK, kind=Kind.ATTEMPT)
            .filter(external_id__in=[r["QualificationRequestId"] for r in requests])
            .values_list("external_id", flat=True)
        )
        clip_ids = list(qualification.items.order_by("position").values_list("clip_id", flat=True))
        for request in requests:
            if request["QualificationRequestId"] in known:
                continue
            imported = _attempt_import(qualification, request, clip_ids)
            counts["imported" if imported else "skipped"] += 1
    return counts


def mturk_qualification_grades_send(*, client: Any = None) -> dict[str, int]:
    """Sends MTurk the grades of attempts that came from its qualification requests: a
    pass grants the qualification (AcceptQualificationRequest), a fail refuses the
    request with the reviewer's feedback. A grade MTurk refuses is sent again next run."""
    graded = QualificationAttempt.objects.filter(
        state__in=[QualificationAttempt.State.APPROVED, QualificationAttempt.State.REJECTED]
    )
    pending = {
        ref.local_id: ref
        for ref in refs.refs(platform=MTURK, kind=Kind.ATTEMPT).filter(
            reported_at__isnull=True, local_id__in=graded.values("pk")
        )
    }
    counts = {"sent": 0, "refused": 0}
    for attempt in graded.filter(pk__in=list(pending)).order_by("reviewed_at", "pk"):
        request_id = pending[attempt.pk].external_id
        client = client or mturk_client()
        try:
            if attempt.state == QualificationAttempt.State.APPROVED:
                client.accept_qualification_request(
                    QualificationRequestId=request_id, IntegerValue=1
                )
            else:
                client.reject_qualification_request(
                    QualificationRequestId=request_id,
                    Reason=(attempt.feedback or "Not passed.")[:MAX_REASON_CHARS],
                )
        except (ClientError, BotoCoreError) as exc:
            logger.warning(
                "MTurk refused the grade of qualification attempt #%s: %s",
                attempt.pk,
                mturk_error(exc),
            )
            counts["refused"] += 1
            continue
        PlatformRef.objects.filter(pk=pending[attempt.pk].pk).update(reported_at=timezone.now())
        counts["sent"] += 1
    return counts


def mturk_qualifications_sync(*, client: Any = None) -> dict[str, int]:
    """Grades out first, then new requests in (the periodic task and the command)."""
    return {
        **mturk_qualification_grades_send(client=client),
        **mturk_qualification_requests_import(client=client),
    }
