"""Qualifications: tests a project sets, workers take and reviewers grade, and the
requirements (qualification, approval record) a batch sets on who may take its HITs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import (
    Count,
)
from django.utils import timezone

from annotation.models import Batch
from annotation.services import caption_problem
from core.models import Membership, Project, Role
from core.services import require_role
from crowd.models import (
    REVIEWERS,
    BatchRequirements,
    Qualification,
    QualificationAnswer,
    QualificationAttempt,
    QualificationClip,
)
from crowd.records import Requirements, requirements_record
from curation.queries import project_clips

MAX_QUALIFICATION_CLIPS = 50


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
    created_by: User,
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


def qualification_set_gold(*, qualification: Qualification, by: User, golds: dict[int, str]) -> int:
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
    *, qualification: Qualification, worker: User, answers: dict[int, str]
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
        problem = caption_problem(
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
    *, attempt: QualificationAttempt, reviewer: User, approve: bool, feedback: str = ""
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
    by: User,
    qualifications: Iterable[Qualification],
    min_approval_percent: int,
    min_approved: int,
    site_wide_record: bool = False,
    locales: Iterable[str] = (),
) -> BatchRequirements:
    """What workers need before they are offered the batch's HITs. Applies to the next
    claim; assignments already accepted keep their time. The approval rate and count are
    the worker's record in the batch's project unless `site_wide_record` asks for their
    record over every project; `locales` (ISO 3166 codes) admit only workers who
    declared one of these countries."""
    require_role(batch.project, by, Role.RESEARCHER)
    with transaction.atomic():
        return requirements_record(
            batch=batch,
            requirements=Requirements(
                qualifications=tuple(qualifications),
                min_approval_percent=min_approval_percent,
                min_approved=min_approved,
                site_wide_record=site_wide_record,
                locales=tuple(locales),
            ),
        )


def qualifications_for(*, worker: User) -> list[dict[str, Any]]:
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
