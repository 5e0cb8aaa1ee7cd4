"""Review: the queue, approvals (with a reviewer's fixes) and rejections, approving a
worker's whole queue, and the auto-approval of batches that ask for it.

Approvals and rejections go through annotation.services.assignment_review, so a rejection
re-opens its slot exactly as the engine does and every decision is recorded (crowd.records)
in the same transaction. The functions check the reviewer's role themselves, so views,
commands and the API share one rule.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import (
    Count,
    DateTimeField,
    ExpressionWrapper,
    F,
    QuerySet,
)
from django.utils import timezone

from annotation.models import Assignment, Caption
from annotation.services import assignment_review, caption_problem, submissions_provisional
from core.models import Project
from core.services import require_role
from crowd.models import (
    REASON_FEEDBACK,
    REVIEWERS,
    RejectReason,
)

AUTO_APPROVE_CHUNK = 200


def review_queue(*, project: Project) -> QuerySet[Assignment]:
    """Submitted assignments of the project, flagged first, then oldest submission first."""
    return (
        Assignment.objects.filter(hit__batch__project=project, state=Assignment.State.SUBMITTED)
        .annotate(n_flags=Count("captions__flags"))
        .select_related("hit__batch", "worker")
        .order_by(F("n_flags").desc(), "submitted_at", "id")
    )


def review_approve(
    *,
    assignment: Assignment,
    reviewer: User,
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
    *, assignment: Assignment, reviewer: User, fixes: dict[int, str], now: datetime
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
        problem = caption_problem(text, min_words=batch.min_words, max_words=batch.max_words)
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
    reviewer: User,
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
    *, project: Project, worker: User, reviewer: User, now: datetime | None = None
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
    sweep, and so are submissions a crowd platform has not confirmed as their worker's;
    each chunk commits on its own."""
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
                .exclude(pk__in=submissions_provisional().values("local_id"))
                .select_related("hit__batch")
                .order_by("submitted_at", "id")[:AUTO_APPROVE_CHUNK]
            )
            for assignment in due:
                assignment_review(assignment=assignment, reviewer=None, approve=True, now=now)
        approved += len(due)
        if len(due) < AUTO_APPROVE_CHUNK:
            return approved


# Imported captions waiting for a reviewer (Label Studio's) ----------------------------------


def imported_queue(*, project: Project) -> QuerySet[Caption]:
    """Captions imported into the project that wait for a reviewer (written in Label
    Studio), oldest first."""
    return (
        Caption.objects.filter(
            provenance=Caption.Provenance.IMPORTED, imported_into=project, pending_review=True
        )
        .select_related("clip")
        .order_by("created_at", "id")
    )


def imported_caption_review(
    *, project: Project, caption_id: int, reviewer: User, approve: bool
) -> Caption:
    """Approves an imported caption into the corpus, or rejects it (it is deleted: the
    annotation it came from may be written again, and then waits here once more). The
    caption must be the project's and still waiting."""
    require_role(project, reviewer, *REVIEWERS)
    with transaction.atomic():
        caption = (
            imported_queue(project=project).select_for_update(of=("self",)).filter(pk=caption_id)
        ).first()
        if caption is None:
            raise ValidationError(f"Caption #{caption_id} is not waiting for review here.")
        if approve:
            caption.pending_review = False
            caption.save(update_fields=["pending_review"])
        else:
            caption.delete()
    return caption
