"""Workflows of review, worker management, qualifications and money.

Approvals and rejections go through annotation.services.assignment_review, so a rejection
re-opens its slot exactly as the engine does and every decision is recorded (crowd.records)
in the same transaction. Reviewers and researchers of a project act on its work; the
functions check that themselves, so views, commands and the API share one rule.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import (
    Count,
    DateTimeField,
    ExpressionWrapper,
    F,
    Q,
    QuerySet,
    Sum,
)
from django.utils import timezone

from annotation.models import Assignment, Batch, Caption
from annotation.services import assignment_review, caption_problem
from core.models import Membership, Project, Role
from core.services import require_role
from crowd.models import (
    REASON_FEEDBACK,
    BatchRequirements,
    Block,
    LedgerEntry,
    Qualification,
    QualificationAnswer,
    QualificationAttempt,
    QualificationClip,
    RejectReason,
)
from curation.queries import project_clips

REVIEWERS = (Role.RESEARCHER, Role.REVIEWER)
AUTO_APPROVE_CHUNK = 200
MAX_QUALIFICATION_CLIPS = 50
MAX_BONUS_CENTS = 100_00  # a typo guard: $100 in one bonus


# Review --------------------------------------------------------------------------------


def review_queue(*, project: Project) -> QuerySet[Assignment]:
    """Submitted assignments of the project, flagged first, then oldest submission first."""
    return (
        Assignment.objects.filter(hit__batch__project=project, state=Assignment.State.SUBMITTED)
        .annotate(n_flags=Count("captions__flags"))
        .select_related("hit__batch", "worker")
        .order_by(F("n_flags").desc(), "submitted_at", "id")
    )


def caption_check(text: str, *, min_words: int, max_words: int) -> str | None:
    """Why a caption is refused, or None: the rules the HIT page applies."""
    return caption_problem(text, min_words=min_words, max_words=max_words)


def review_approve(
    *,
    assignment: Assignment,
    reviewer: Any,
    feedback: str = "",
    fixes: dict[int, str] | None = None,
    now: datetime | None = None,
) -> Assignment:
    """Approves a submitted assignment, first replacing the text of the captions in
    `fixes` (caption id -> corrected text; the worker's text is kept beside it)."""
    require_role(assignment.hit.batch.project, reviewer, *REVIEWERS)
    now = now or timezone.now()
    with transaction.atomic():
        if fixes:
            _captions_fix(assignment=assignment, reviewer=reviewer, fixes=fixes, now=now)
        return assignment_review(
            assignment=assignment, reviewer=reviewer, approve=True, feedback=feedback, now=now
        )


def _captions_fix(
    *, assignment: Assignment, reviewer: Any, fixes: dict[int, str], now: datetime
) -> None:
    if assignment.state != Assignment.State.SUBMITTED:
        raise ValidationError(
            f"This assignment is {assignment.get_state_display().lower()}; "
            "only submitted work can be fixed."
        )
    batch = assignment.hit.batch
    captions = {c.pk: c for c in Caption.objects.filter(assignment=assignment)}
    errors: dict[str, list[str]] = {}
    changed: list[Caption] = []
    for caption_id, raw in fixes.items():
        caption = captions.get(caption_id)
        if caption is None:
            errors["__all__"] = [f"Caption #{caption_id} is not part of this assignment."]
            continue
        text = raw.strip()
        if text == caption.current_text:
            continue
        problem = caption_check(text, min_words=batch.min_words, max_words=batch.max_words)
        if problem:
            errors[f"fix-{caption_id}"] = [f"The fixed caption {problem}."]
            continue
        caption.fixed_text, caption.fixed_by, caption.fixed_at = text, reviewer, now
        changed.append(caption)
    if errors:
        raise ValidationError(errors)
    Caption.objects.bulk_update(changed, ["fixed_text", "fixed_by", "fixed_at"])


def review_reject(
    *,
    assignment: Assignment,
    reviewer: Any,
    reason: str,
    feedback: str = "",
    now: datetime | None = None,
) -> Assignment:
    """Rejects a submitted assignment with a canned reason; the worker reads `feedback`,
    or the reason's standard text when it is empty. The HIT's slot re-opens."""
    if reason not in RejectReason.values:
        choices = ", ".join(RejectReason.values)
        raise ValidationError({"reason": f"Unknown reason {reason!r}; use one of {choices}."})
    feedback = feedback.strip() or REASON_FEEDBACK[reason]
    return assignment_review(
        assignment=assignment,
        reviewer=reviewer,
        approve=False,
        reason=reason,
        feedback=feedback,
        now=now,
    )


def worker_approve_all(
    *, project: Project, worker: Any, reviewer: Any, now: datetime | None = None
) -> int:
    """Approves every submitted assignment of `worker` in the project's batches, and
    nothing else; returns how many."""
    require_role(project, reviewer, *REVIEWERS)
    now = now or timezone.now()
    pending = Assignment.objects.filter(
        hit__batch__project=project, worker=worker, state=Assignment.State.SUBMITTED
    ).order_by("submitted_at", "id")
    approved = 0
    with transaction.atomic():
        for assignment in pending.select_related("hit__batch__project"):
            assignment_review(assignment=assignment, reviewer=reviewer, approve=True, now=now)
            approved += 1
    return approved


def assignments_auto_approve(*, now: datetime | None = None) -> int:
    """Approves submitted assignments older than their batch's auto-approval delay, as
    MTurk does; returns how many. Rows held by a reviewer right now are left for the next
    sweep, and each chunk commits on its own."""
    now = now or timezone.now()
    due_at = ExpressionWrapper(
        F("submitted_at") + F("hit__batch__auto_approve_delay"), output_field=DateTimeField()
    )
    approved = 0
    while True:
        with transaction.atomic():
            due = list(
                Assignment.objects.select_for_update(skip_locked=True, of=("self",))
                .alias(due_at=due_at)
                .filter(state=Assignment.State.SUBMITTED, due_at__lte=now)
                .select_related("hit__batch")
                .order_by("submitted_at", "id")[:AUTO_APPROVE_CHUNK]
            )
            for assignment in due:
                assignment_review(assignment=assignment, reviewer=None, approve=True, now=now)
        approved += len(due)
        if len(due) < AUTO_APPROVE_CHUNK:
            return approved


# Workers -------------------------------------------------------------------------------


def project_workers(*, project: Project) -> QuerySet[Any]:
    """People a reviewer of the project may manage: its annotators, and anyone who has
    worked on its batches (a worker who left still has history and pay)."""
    annotators = Membership.objects.filter(project=project, role=Role.ANNOTATOR).values("user_id")
    worked = Assignment.objects.filter(hit__batch__project=project).values("worker_id")
    return get_user_model().objects.filter(Q(pk__in=annotators) | Q(pk__in=worked))


def worker_summaries(*, project: Project) -> list[dict[str, Any]]:
    """Per worker of the project: counts by state, approval rate, earnings, block."""
    workers = list(project_workers(project=project).order_by("username"))
    counts: dict[int, dict[str, int]] = {}
    rows = (
        Assignment.objects.filter(hit__batch__project=project)
        .values_list("worker_id", "state")
        .annotate(n=Count("pk"))
    )
    for worker_id, state, n in rows:
        counts.setdefault(worker_id, {})[state] = n
    earned = dict(
        LedgerEntry.objects.filter(project=project)
        .values_list("worker_id")
        .annotate(total=Sum("amount_cents"))
        .values_list("worker_id", "total")
    )
    blocked = set(
        Block.objects.active().filter(project=project).values_list("worker_id", flat=True)
    )
    return [
        {
            "worker": worker,
            **_rates(counts.get(worker.pk, {})),
            "earned_cents": earned.get(worker.pk, 0),
            "blocked": worker.pk in blocked,
        }
        for worker in workers
    ]


def _rates(by_state: dict[str, int]) -> dict[str, Any]:
    approved = by_state.get(Assignment.State.APPROVED, 0)
    rejected = by_state.get(Assignment.State.REJECTED, 0)
    reviewed = approved + rejected
    return {
        "submitted": by_state.get(Assignment.State.SUBMITTED, 0),
        "approved": approved,
        "rejected": rejected,
        "released": sum(by_state.get(s, 0) for s in Assignment.RELEASED if s != "rejected"),
        "approval_percent": 100 * approved / reviewed if reviewed else None,
    }


def worker_summary(*, project: Project, worker: Any) -> dict[str, Any]:
    by_state = dict(
        Assignment.objects.filter(hit__batch__project=project, worker=worker)
        .values_list("state")
        .annotate(n=Count("pk"))
        .values_list("state", "n")
    )
    money = LedgerEntry.objects.filter(project=project, worker=worker)
    totals = dict(
        money.values_list("kind").annotate(total=Sum("amount_cents")).values_list("kind", "total")
    )
    rewards = totals.get(LedgerEntry.Kind.REWARD, 0)
    bonuses = totals.get(LedgerEntry.Kind.BONUS, 0)
    return {
        **_rates(by_state),
        "rewards_cents": rewards,
        "bonuses_cents": bonuses,
        "earned_cents": rewards + bonuses,
    }


def _check_worker(project: Project, worker: Any) -> None:
    if not project_workers(project=project).filter(pk=worker.pk).exists():
        raise ValidationError(f"{worker} is not a worker of {project}.")


def worker_block(*, project: Project, worker: Any, by: Any, reason: str) -> Block:
    """Bars the worker from the project's HITs (hit_claim skips them) with the reason
    they are shown. Work already submitted stays in the review queue."""
    require_role(project, by, *REVIEWERS)
    _check_worker(project, worker)
    reason = reason.strip()
    if not reason:
        raise ValidationError({"reason": "Say why: the worker is shown the reason."})
    block = Block(project=project, worker=worker, reason=reason, blocked_by=by)
    block.full_clean(validate_constraints=False)
    try:
        with transaction.atomic():
            block.save()
    except IntegrityError:
        raise ValidationError(f"{worker} is already blocked on {project}.") from None
    return block


def worker_unblock(*, project: Project, worker: Any, by: Any, reason: str = "") -> Block:
    require_role(project, by, *REVIEWERS)
    with transaction.atomic():
        block = (
            Block.objects.active()
            .select_for_update()
            .filter(project=project, worker=worker)
            .first()
        )
        if block is None:
            raise ValidationError(f"{worker} is not blocked on {project}.")
        block.lifted_at = timezone.now()
        block.lifted_by = by
        block.lift_reason = reason.strip()
        block.save(update_fields=["lifted_at", "lifted_by", "lift_reason"])
    return block


# Money ---------------------------------------------------------------------------------


def bonus_pay(
    *,
    project: Project,
    worker: Any,
    by: Any,
    amount_cents: int,
    reason: str,
    idempotency_key: str,
    assignment: Assignment | None = None,
) -> tuple[LedgerEntry, bool]:
    """Pays the worker a bonus, once per idempotency key: a repeated request (a form sent
    twice) returns the first bonus and False. A key reused for a different bonus is
    refused."""
    require_role(project, by, *REVIEWERS)
    _check_worker(project, worker)
    reason = reason.strip()
    key = idempotency_key.strip()
    errors: dict[str, str] = {}
    if not 1 <= amount_cents <= MAX_BONUS_CENTS:
        errors["amount_cents"] = f"A bonus is 1¢ to {MAX_BONUS_CENTS // 100} dollars."
    if not reason:
        errors["reason"] = "Say why: the worker reads the reason."
    if not key or len(key) > 64:
        errors["idempotency_key"] = "The request needs an idempotency key of 1 to 64 characters."
    if assignment is not None and (
        assignment.worker_id != worker.pk or assignment.hit.batch.project_id != project.pk
    ):
        errors["assignment"] = f"Assignment #{assignment.pk} is not this worker's in {project}."
    if errors:
        raise ValidationError(errors)
    same = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.BONUS, idempotency_key=key)
    try:
        with transaction.atomic():
            entry = LedgerEntry.objects.create(
                kind=LedgerEntry.Kind.BONUS,
                project=project,
                worker=worker,
                batch=assignment.hit.batch if assignment else None,
                assignment=assignment,
                amount_cents=amount_cents,
                reason=reason,
                paid_by=by,
                idempotency_key=key,
            )
    except IntegrityError:
        first = same.first()
        if first is None:
            raise
        if (first.project_id, first.worker_id, first.amount_cents) != (
            project.pk,
            worker.pk,
            amount_cents,
        ):
            raise ValidationError(
                "This idempotency key was already used for another bonus."
            ) from None
        return first, False
    return entry, True


def ledger_totals(*, project: Project) -> dict[str, Any]:
    """Rewards and bonuses of the project per worker and per batch, in cents."""
    entries = LedgerEntry.objects.filter(project=project)

    def by(field: str) -> list[dict[str, Any]]:
        rows = (
            entries.values(field)
            .annotate(
                rewards=Sum("amount_cents", filter=Q(kind=LedgerEntry.Kind.REWARD), default=0),
                bonuses=Sum("amount_cents", filter=Q(kind=LedgerEntry.Kind.BONUS), default=0),
                n=Count("pk"),
            )
            .order_by(field)
        )
        return [{**row, "total": row["rewards"] + row["bonuses"]} for row in rows]

    per_worker = by("worker__username")
    per_batch = by("batch__name")
    return {
        "per_worker": per_worker,
        "per_batch": per_batch,
        "total": sum(row["total"] for row in per_worker),
    }


CSV_HEADER = [
    "date",
    "kind",
    "worker",
    "batch_id",
    "batch",
    "assignment_id",
    "amount_usd",
    "reason",
    "paid_by",
]


def _cell(value: Any) -> str:
    """A CSV cell a spreadsheet shows as text: a leading =, +, - or @ would start a formula."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def ledger_csv(*, project: Project, user: Any) -> Iterable[str]:
    """The project's ledger as CSV lines (researchers only), oldest first."""
    require_role(project, user, Role.RESEARCHER)
    entries = (
        LedgerEntry.objects.filter(project=project)
        .select_related("worker", "batch", "paid_by")
        .order_by("created_at", "id")
    )
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def line(row: list[Any]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(row)
        return buffer.getvalue()

    yield line(CSV_HEADER)
    for e in entries.iterator(chunk_size=2000):
        yield line(
            [
                e.created_at.isoformat(),
                e.kind,
                _cell(e.worker.get_username()),
                e.batch_id or "",
                _cell(e.batch.name) if e.batch else "",
                e.assignment_id or "",
                f"{e.amount_cents / 100:.2f}",
                _cell(e.reason),
                _cell(e.paid_by.get_username()) if e.paid_by else "",
            ]
        )


# Qualifications ------------------------------------------------------------------------


def _parse_clip_ids(raw: str) -> list[int]:
    ids: list[int] = []
    for token in raw.replace(",", " ").split():
        if not token.isdigit():
            raise ValidationError({"clip_ids": f"{token!r} is not a clip id (a whole number)."})
        if int(token) not in ids:
            ids.append(int(token))
    return ids


def qualification_create(
    *,
    project: Project,
    created_by: Any,
    name: str,
    clip_ids: str,
    instructions: str = "",
    min_words: int = 3,
    max_words: int = 40,
) -> Qualification:
    """A qualification test on some of the project's fetched clips, given as ids
    separated by commas or spaces (the clips page shows them)."""
    require_role(project, created_by, Role.RESEARCHER)
    ids = _parse_clip_ids(clip_ids)
    if not 1 <= len(ids) <= MAX_QUALIFICATION_CLIPS:
        raise ValidationError({"clip_ids": f"Give 1 to {MAX_QUALIFICATION_CLIPS} clips."})
    found = set(project_clips(project).filter(pk__in=ids).values_list("pk", flat=True))
    if missing := [i for i in ids if i not in found]:
        raise ValidationError({"clip_ids": f"Clips {missing} are not clips of {project}."})
    with transaction.atomic():
        qualification = Qualification(
            project=project,
            name=name.strip(),
            instructions=instructions.strip(),
            min_words=min_words,
            max_words=max_words,
            created_by=created_by,
        )
        qualification.full_clean()
        qualification.save()
        QualificationClip.objects.bulk_create(
            QualificationClip(qualification=qualification, clip_id=clip_id, position=position)
            for position, clip_id in enumerate(ids)
        )
    return qualification


def qualification_set_gold(*, qualification: Qualification, by: Any, golds: dict[int, str]) -> int:
    """Stores reference captions (clip id -> text; empty removes it); returns how many
    changed. Reviewers see them beside the worker's answers, workers never do."""
    require_role(qualification.project, by, Role.RESEARCHER)
    items = {item.clip_id: item for item in qualification.items.all()}
    if unknown := sorted(set(golds) - set(items)):
        raise ValidationError(f"Clips {unknown} are not part of {qualification}.")
    changed = []
    for clip_id, text in golds.items():
        item = items[clip_id]
        if item.gold_caption != text.strip():
            item.gold_caption = text.strip()
            changed.append(item)
    QualificationClip.objects.bulk_update(changed, ["gold_caption"])
    return len(changed)


def qualification_submit(
    *, qualification: Qualification, worker: Any, answers: dict[int, str]
) -> QualificationAttempt:
    """Stores the worker's caption for every clip of the test, checked by the same rules
    as a HIT, and queues the attempt for a reviewer. Refused while an attempt is in review
    or once passed."""
    if qualification.project.role_of(worker) != Role.ANNOTATOR:
        raise PermissionDenied("Only annotators of the project take its qualifications.")
    clip_ids = list(qualification.items.order_by("position").values_list("clip_id", flat=True))
    errors: dict[str, list[str]] = {}
    texts: dict[int, str] = {}
    if unknown := sorted(set(answers) - set(clip_ids)):
        errors["__all__"] = [f"Clips {unknown} are not part of this test."]
    for number, clip_id in enumerate(clip_ids, start=1):
        text = (answers.get(clip_id) or "").strip()
        problem = caption_check(
            text, min_words=qualification.min_words, max_words=qualification.max_words
        )
        if problem:
            errors[f"caption-{clip_id}"] = [f"The caption for clip {number} {problem}."]
        texts[clip_id] = text
    if errors:
        raise ValidationError(errors)
    try:
        with transaction.atomic():
            attempt = QualificationAttempt.objects.create(
                qualification=qualification, worker=worker
            )
            QualificationAnswer.objects.bulk_create(
                QualificationAnswer(attempt=attempt, clip_id=clip_id, text=text)
                for clip_id, text in texts.items()
            )
    except IntegrityError:
        raise ValidationError(
            "You already have an attempt at this qualification in review or passed."
        ) from None
    return attempt


def qualification_grade(
    *, attempt: QualificationAttempt, reviewer: Any, approve: bool, feedback: str = ""
) -> QualificationAttempt:
    require_role(attempt.qualification.project, reviewer, *REVIEWERS)
    feedback = feedback.strip()
    if not approve and not feedback:
        raise ValidationError({"feedback": "Tell the worker what to do better."})
    with transaction.atomic():
        attempt = QualificationAttempt.objects.select_for_update().get(pk=attempt.pk)
        if attempt.state != QualificationAttempt.State.SUBMITTED:
            raise ValidationError(
                f"This attempt was already graded ({attempt.get_state_display().lower()})."
            )
        attempt.state = (
            QualificationAttempt.State.APPROVED if approve else QualificationAttempt.State.REJECTED
        )
        attempt.reviewer = reviewer
        attempt.reviewed_at = timezone.now()
        attempt.feedback = feedback
        attempt.save(update_fields=["state", "reviewer", "reviewed_at", "feedback"])
    return attempt


def batch_requirements_set(
    *,
    batch: Batch,
    by: Any,
    qualifications: Iterable[Qualification],
    min_approval_percent: int,
    min_approved: int,
) -> BatchRequirements:
    """What workers need before they are offered the batch's HITs. Applies to the next
    claim; assignments already accepted keep their time."""
    require_role(batch.project, by, Role.RESEARCHER)
    qualifications = list(qualifications)
    if foreign := [q.name for q in qualifications if q.project_id != batch.project_id]:
        raise ValidationError({"qualifications": f"{foreign} belong to another project."})
    if not 0 <= min_approval_percent <= 100:
        raise ValidationError({"min_approval_percent": "Give a percentage from 0 to 100."})
    if min_approved < 0:
        raise ValidationError({"min_approved": "Give a count of 0 or more."})
    with transaction.atomic():
        requirements, _ = BatchRequirements.objects.update_or_create(
            batch=batch,
            defaults={"min_approval_percent": min_approval_percent, "min_approved": min_approved},
        )
        requirements.qualifications.set(qualifications)
    return requirements


def qualifications_for(*, worker: Any) -> list[dict[str, Any]]:
    """Qualifications of the projects the worker annotates, with the worker's latest
    attempt and the open batches that require each: what to take to unlock work."""
    projects = Membership.objects.filter(user=worker, role=Role.ANNOTATOR).values("project_id")
    now = timezone.now()
    qualifications = (
        Qualification.objects.filter(project__in=projects)
        .select_related("project")
        .annotate(n_clips=Count("items"))
        .order_by("project__name", "name")
    )
    attempts: dict[int, QualificationAttempt] = {}
    for attempt in QualificationAttempt.objects.filter(worker=worker).order_by("submitted_at"):
        attempts[attempt.qualification_id] = attempt  # the latest wins
    unlocks: dict[int, list[str]] = {}
    required = BatchRequirements.qualifications.through.objects.filter(
        batchrequirements__batch__state=Batch.State.PUBLISHED,
        batchrequirements__batch__expires_at__gt=now,
        qualification__in=qualifications,
    ).values_list("qualification_id", "batchrequirements__batch__name")
    for qualification_id, batch_name in required:
        unlocks.setdefault(qualification_id, []).append(batch_name)
    return [
        {
            "qualification": q,
            "attempt": attempts.get(q.pk),
            "unlocks": sorted(unlocks.get(q.pk, [])),
        }
        for q in qualifications
    ]
