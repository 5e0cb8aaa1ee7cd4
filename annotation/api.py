"""Annotation API (mounted on /api/ by earmark.api): batches, and the worker's assignments
and captions. Review lives in crowd.api.

Who sees what, as on the pages:
- /api/projects/{slug}/batches…: a project you are not in is a 404; researchers and
  reviewers read; only researchers create, publish, pause and close batches; annotators
  get 403.
- /api/work/…: the worker's own assignments. An assignment exists only for the worker
  holding it: anyone else (another worker, the project's researcher, an outsider) gets 404,
  and a worker's answers carry nothing of other workers (no captions, pay or names).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.db.models import Count
from django.http import Http404, HttpRequest
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils import timezone
from ninja import Field, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status

from annotation import rules, services
from annotation.models import Assignment, Batch, Caption, ClipAudioServed, HitClip
from annotation.presets import BATCH_PRESETS, batch_preset
from core import throttling
from core.access import project_for_api, signed_in_user
from core.media import ByteRange, media_response
from core.models import Membership, Role
from core.schemas import ErrorOut, FieldErrorsOut, error_text, page_or_404, refusal
from crowd.models import Qualification
from crowd.queries import blocked_everywhere, blocks_of, requirements_refusals
from crowd.records import Requirements
from curation.models import Clip, Label, Split, Subset, WordLabel
from curation.services import ClipMediaBroken, audio_check_key, clip_audio_check
from curation.serving import NO_AUDIO_YET

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

router = Router(tags=["annotation"])

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)
MAX_MINE = 200  # the worker's own list, newest first
# what a batch's answer reads of its requirements, in one query each for a list
REQUIREMENTS_PREFETCH = ("requirements__locales", "requirements__qualifications")


class _HitCount(TypedDict):
    n_hits: int


if TYPE_CHECKING:
    # a batch read with `.annotate(n_hits=Count("hits"))`, as the batch answers show it
    CountedBatch = WithAnnotations[Batch, _HitCount]


# Schemas --------------------------------------------------------------------------------


class ProgressOut(Schema):
    clips: int
    wanted: int  # clips x captions per clip
    submitted: int  # captions waiting for review
    approved: int
    rejected: int
    in_progress: int  # assignments accepted and not yet submitted


class BatchIn(Schema):
    name: str
    subset: str = Field(description="slug of a subset of the project")
    split: str = Field(Split.VAL, description=f"one of {', '.join(Split.values)}")
    captions_per_clip: int | None = Field(
        None,
        description="None: what the subset's recipe asks (AudioCaps: 1 for train, 5 for val, test)",
    )
    clips_per_hit: int = 5
    reward_cents: int = Field(
        20,
        ge=0,
        description="paid per approved HIT; left out with reward_cents_per_clip given, that "
        "rate times clips_per_hit",
    )
    reward_cents_per_clip: int | None = Field(
        None, ge=0, description="a rate per clip; the reward per HIT follows it unless given"
    )
    time_allotted_minutes: int = Field(30, ge=1)
    lifetime_hours: int = Field(7 * 24, ge=1)
    auto_approve_days: int = Field(3, ge=0)
    min_words: int = 3
    max_words: int = 40
    bonus_cap_cents: int = Field(
        100_00, ge=0, description="the most paid in bonuses, all together, for this batch's work"
    )
    publish: bool = Field(True, description="false keeps the batch a draft")
    # who may take its HITs (also GET/PUT …/batches/{id}/requirements)
    min_approval_percent: int = Field(0, ge=0, le=100)
    min_approved: int = Field(0, ge=0)
    site_wide_record: bool = Field(
        False, description="count the worker's reviews in every project, not only this one"
    )
    locales: list[str] = Field(
        [], description="ISO 3166 country codes a worker must have declared; none: any"
    )
    qualifications: list[int] = Field(
        [], description="ids of the project's qualification tests a worker must pass"
    )
    preset: str | None = Field(
        None,
        description="fills the fields it names that the request leaves out: "
        + "; ".join(
            f"{name!r} ({p.label}): reward_cents_per_clip {p.reward_cents_per_clip}, "
            f"min_approval_percent {p.min_approval_percent}, min_approved {p.min_approved}, "
            f"site_wide_record {str(p.site_wide_record).lower()}, locales {list(p.locales)}"
            for name, p in BATCH_PRESETS.items()
        ),
    )


class RequirementsOut(Schema):
    min_approval_percent: int
    min_approved: int
    site_wide_record: bool
    locales: list[str]
    qualifications: list[int]


class BatchOut(Schema):
    id: int
    name: str
    subset: str
    split: str
    state: str
    mode: str
    captions_per_clip: int
    clips_per_hit: int
    reward_cents: int
    reward_cents_per_clip: int | None
    reward_follows_clips: bool  # false: reward_cents was set by hand
    time_allotted_seconds: int
    lifetime_seconds: int
    auto_approve_delay_seconds: int
    min_words: int
    max_words: int
    bonus_cap_cents: int
    hits: int
    created_at: datetime
    published_at: datetime | None
    expires_at: datetime | None
    progress: ProgressOut
    requirements: RequirementsOut


class LabelHintOut(Schema):
    name: str
    description: str


class HintOut(Schema):
    word: str  # the word label the HIT page shows ("dog")
    labels: list[LabelHintOut]  # the ontology labels it stands for, with their definitions


class WorkClipOut(Schema):
    id: int
    number: int  # 1-based position in the HIT
    duration_seconds: float
    audio_url: str  # served only to the assignment's worker
    peaks: list[float]
    hints: list[HintOut]
    caption: str | None  # the worker's own caption, once submitted


class WorkBatchOut(Schema):
    id: int
    name: str
    mode: str
    reward_cents: int
    time_allotted_seconds: int
    min_words: int
    max_words: int


class WorkAssignmentOut(Schema):
    id: int
    state: str
    accepted_at: datetime
    deadline: datetime
    submitted_at: datetime | None
    reviewed_at: datetime | None
    feedback: str  # the reviewer's words to this worker
    batch: WorkBatchOut
    guidance: list[str]  # the caption rules, as the HIT page states them
    clips: list[WorkClipOut]


class WorkAssignmentBriefOut(Schema):
    id: int
    state: str
    batch: str
    reward_cents: int
    accepted_at: datetime
    submitted_at: datetime | None
    feedback: str


class WorkSummaryOut(Schema):
    submitted: int
    approved: int
    rejected: int
    approval_percent: float | None
    earned_cents: int
    pending_cents: int
    bonus_cents: int
    total_cents: int


class BlockedOut(Schema):
    detail: str
    reasons: list[str]


class SubmitIn(Schema):
    captions: dict[int, str] = Field(description="clip id -> caption, one per clip of the HIT")


class CaptionOut(Schema):
    id: int
    clip_id: int
    assignment_id: int
    worker: str
    state: str  # the assignment's: submitted, approved or rejected
    text: str
    fixed_text: str
    created_at: datetime


class CaptionPageOut(Schema):
    count: int
    page: int
    pages: int
    items: list[CaptionOut]


# Access ---------------------------------------------------------------------------------


def _batch(request: HttpRequest, slug: str, batch_id: int, *roles: str) -> CountedBatch:
    project = project_for_api(request, slug, *roles)
    batch = (
        Batch.objects.select_related("project", "subset", "requirements")
        .prefetch_related(*REQUIREMENTS_PREFETCH)
        .annotate(n_hits=Count("hits"))
        .filter(project=project, pk=batch_id)
        .first()
    )
    if batch is None:
        raise HttpError(404, f"No batch #{batch_id} in project {slug!r}.")
    return batch


def _mine(request: HttpRequest, pk: int) -> Assignment:
    """Only the worker holding an assignment sees it; for anyone else it does not exist."""
    assignment = (
        Assignment.objects.select_related("hit__batch")
        .filter(pk=pk, worker=signed_in_user(request))
        .first()
    )
    if assignment is None:
        raise HttpError(404, f"No assignment #{pk} of yours.")
    return assignment


def _clip_of_mine(
    request: HttpRequest, pk: int, clip_id: int
) -> tuple[Clip, str, services.AudioHeld] | None:
    """The clip, when it is part of the HIT of the worker's assignment `pk`, with the
    assignment's state and what its served record holds; None otherwise. One query in SQL:
    every clip a worker plays comes here (the assignment, then its HIT's clip, were two ORM
    queries; the served record is read with them so that a replay or a range already
    served writes nothing)."""
    assignments, hit_clips = Assignment._meta.db_table, HitClip._meta.db_table
    served = ClipAudioServed._meta.db_table
    found = Clip.objects.raw(
        f"SELECT c.*, a.state AS assignment_state, s.whole_at IS NOT NULL AS served_whole, "
        f"s.file_bytes AS served_bytes, s.ranges AS served_ranges FROM {assignments} a "
        f"JOIN {hit_clips} hc ON hc.hit_id = a.hit_id "
        f"JOIN {Clip._meta.db_table} c ON c.id = hc.clip_id "
        f"LEFT JOIN {served} s ON s.assignment_id = a.id AND s.clip_id = c.id "
        "WHERE a.id = %s AND a.worker_id = %s AND hc.clip_id = %s",
        [pk, signed_in_user(request).pk, clip_id],
    )
    clip = next(iter(found), None)
    if clip is None:
        return None
    # a raw query's extra columns are plain instance attributes, undeclared on Clip; the
    # JSON column comes as text (PostgreSQL's jsonb as Django reads it, SQLite's text)
    extra = vars(clip)
    ranges = extra["served_ranges"]
    return (
        clip,
        str(extra["assignment_state"]),
        {
            "whole": bool(extra["served_whole"]),
            "file_bytes": extra["served_bytes"],
            "ranges": json.loads(ranges) if isinstance(ranges, str) else ranges,
        },
    )


def _seconds(delta: timedelta) -> int:
    return int(delta.total_seconds())


# Batches (researchers; reviewers read) -------------------------------------------------


def _batch_out(batch: CountedBatch) -> dict[str, Any]:
    return {
        **{f: getattr(batch, f) for f in ("id", "name", "split", "state", "mode")},
        **{f: getattr(batch, f) for f in ("captions_per_clip", "clips_per_hit", "reward_cents")},
        **{f: getattr(batch, f) for f in ("reward_cents_per_clip", "reward_follows_clips")},
        **{f: getattr(batch, f) for f in ("min_words", "max_words", "created_at")},
        "bonus_cap_cents": batch.bonus_cap_cents,
        "subset": batch.subset.slug,
        "time_allotted_seconds": _seconds(batch.time_allotted),
        "lifetime_seconds": _seconds(batch.lifetime),
        "auto_approve_delay_seconds": _seconds(batch.auto_approve_delay),
        "hits": batch.n_hits,
        "published_at": batch.published_at,
        "expires_at": batch.expires_at,
        "progress": services.batch_progress(batch=batch),
        "requirements": _requirements_out(batch),
    }


@router.get(
    "/projects/{slug}/batches", response={200: list[BatchOut], 403: ErrorOut, 404: ErrorOut}
)
def batch_list(request: HttpRequest, slug: str) -> Any:
    project = project_for_api(request, slug, *READ)
    batches = (
        project.batches.select_related("subset", "requirements")
        .prefetch_related(*REQUIREMENTS_PREFETCH)
        .annotate(n_hits=Count("hits"))
    )
    return [_batch_out(b) for b in batches]


@router.post(
    "/projects/{slug}/batches",
    response={201: BatchOut, 400: FieldErrorsOut, 403: ErrorOut, 404: ErrorOut},
)
def batch_create(request: HttpRequest, slug: str, payload: BatchIn) -> Any:
    """Creates a batch of HITs from a subset's split and publishes it (unless `publish` is
    false): one HIT per `clips_per_hit` fetched clips. A `preset` fills the fields the
    request leaves out; those it gives win."""
    project = project_for_api(request, slug, *WRITE)
    subset = Subset.objects.filter(project=project, slug=payload.subset).first()
    if subset is None:
        message = f"No subset {payload.subset!r} in project {slug!r}."
        return Status(400, {"detail": message, "errors": {"subset": [message]}})
    try:
        payload = _preset_applied(payload)
    except ValidationError as exc:
        return refusal(exc)
    durations, too_long = _batch_durations(payload)
    if too_long:
        return refusal(ValidationError(too_long))
    by_id = {q.pk: q for q in Qualification.objects.filter(project=project)}
    if unknown := sorted(set(payload.qualifications) - set(by_id)):
        return refusal(
            ValidationError({"qualifications": f"No qualification {unknown} in project {slug!r}."})
        )
    try:
        batch = services.batch_publish(
            subset=subset,
            split=payload.split,
            name=payload.name.strip(),
            captions_per_clip=payload.captions_per_clip,
            clips_per_hit=payload.clips_per_hit,
            reward_cents=_reward_per_hit_given(payload),
            reward_cents_per_clip=payload.reward_cents_per_clip,
            time_allotted=durations["time_allotted"],
            lifetime=durations["lifetime"],
            auto_approve_delay=durations["auto_approve_delay"],
            min_words=payload.min_words,
            max_words=payload.max_words,
            bonus_cap_cents=payload.bonus_cap_cents,
            created_by=signed_in_user(request),
            publish=payload.publish,
            requirements=Requirements(
                qualifications=tuple(by_id[pk] for pk in payload.qualifications),
                min_approval_percent=payload.min_approval_percent,
                min_approved=payload.min_approved,
                site_wide_record=payload.site_wide_record,
                locales=tuple(payload.locales),
            ),
        )
    except ValidationError as exc:
        if not hasattr(exc, "error_dict"):
            exc = ValidationError({"__all__": exc.messages})
        return refusal(exc)
    return Status(201, _batch_out(_batch(request, slug, batch.pk, *WRITE)))


def _preset_applied(payload: BatchIn) -> BatchIn:
    """The payload with its preset's fields filled in where the request left them out."""
    if payload.preset is None:
        return payload
    filled = batch_preset(payload.preset).fields()
    left_out = {
        name: value for name, value in filled.items() if name not in payload.model_fields_set
    }
    return payload.model_copy(update=left_out)


def _reward_per_hit_given(payload: BatchIn) -> int | None:
    """The reward per HIT the request sets; None, so that it follows the rate, when the
    request (or its preset) gives a rate per clip and no reward per HIT."""
    if payload.reward_cents_per_clip is not None and "reward_cents" not in payload.model_fields_set:
        return None
    return payload.reward_cents


def _requirements_out(batch: Batch) -> dict[str, Any]:
    """The batch's requirements; nothing asked when it has none."""
    current = getattr(batch, "requirements", None)
    if current is None:
        return {
            "min_approval_percent": 0,
            "min_approved": 0,
            "site_wide_record": False,
            "locales": [],
            "qualifications": [],
        }
    return {
        "min_approval_percent": current.min_approval_percent,
        "min_approved": current.min_approved,
        "site_wide_record": current.site_wide_record,
        "locales": sorted(str(locale.country) for locale in current.locales.all()),
        "qualifications": sorted(q.pk for q in current.qualifications.all()),
    }


def _batch_durations(payload: BatchIn) -> tuple[dict[str, timedelta], dict[str, list[str]]]:
    """The payload's durations as batch_publish takes them, and the fields longer than a
    batch allows, by field: checked in whole units first, since a number like 10**12
    overflows a timedelta before batch_publish could refuse it."""
    fields = (
        # argument, API field, its value, unit, longest, the refusal
        (
            "time_allotted",
            "time_allotted_minutes",
            payload.time_allotted_minutes,
            "minutes",
            services.MAX_TIME_ALLOTTED,
            "A worker may hold a HIT for at most {most:,} minutes (1 day).",
        ),
        (
            "lifetime",
            "lifetime_hours",
            payload.lifetime_hours,
            "hours",
            services.MAX_LIFETIME,
            "A batch is offered for at most {most:,} hours (365 days).",
        ),
        (
            "auto_approve_delay",
            "auto_approve_days",
            payload.auto_approve_days,
            "days",
            services.MAX_AUTO_APPROVE_DELAY,
            "Submitted work is approved after at most {most:,} days.",
        ),
    )
    durations: dict[str, timedelta] = {}
    too_long: dict[str, list[str]] = {}
    for argument, field, value, unit, longest, refusal_text in fields:
        most = longest // timedelta(**{unit: 1})
        if value > most:
            too_long[field] = [refusal_text.format(most=most)]
        else:
            durations[argument] = timedelta(**{unit: value})
    return durations, too_long


@router.get(
    "/projects/{slug}/batches/{batch_id}",
    response={200: BatchOut, 403: ErrorOut, 404: ErrorOut},
)
def batch_get(request: HttpRequest, slug: str, batch_id: int) -> Any:
    return _batch_out(_batch(request, slug, batch_id, *READ))


def _batch_move(request: HttpRequest, slug: str, batch_id: int, state: str) -> Any:
    batch = _batch(request, slug, batch_id, *WRITE)
    try:
        services.batch_move(batch=batch, state=state, user=signed_in_user(request))
    except ValidationError as exc:
        return Status(409, {"detail": error_text(exc)})
    return _batch_out(_batch(request, slug, batch_id, *WRITE))


MOVE_RESPONSES = {200: BatchOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut}


@router.post("/projects/{slug}/batches/{batch_id}/publish", response=MOVE_RESPONSES)
def batch_publish(request: HttpRequest, slug: str, batch_id: int) -> Any:
    """Offers a draft or paused batch's HITs to workers."""
    return _batch_move(request, slug, batch_id, Batch.State.PUBLISHED)


@router.post("/projects/{slug}/batches/{batch_id}/pause", response=MOVE_RESPONSES)
def batch_pause(request: HttpRequest, slug: str, batch_id: int) -> Any:
    """Stops new claims; accepted assignments keep their time and may be submitted."""
    return _batch_move(request, slug, batch_id, Batch.State.PAUSED)


@router.post("/projects/{slug}/batches/{batch_id}/close", response=MOVE_RESPONSES)
def batch_close(request: HttpRequest, slug: str, batch_id: int) -> Any:
    """Finishes the batch for good; accepted assignments may still be submitted."""
    return _batch_move(request, slug, batch_id, Batch.State.FINISHED)


@router.get(
    "/projects/{slug}/batches/{batch_id}/captions",
    response={200: CaptionPageOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
)
def batch_captions(
    request: HttpRequest,
    slug: str,
    batch_id: int,
    state: str = "",
    page: int = 1,
    per_page: int = 100,
) -> Any:
    """The batch's captions, oldest first; `state` filters by the assignment's state."""
    batch = _batch(request, slug, batch_id, *READ)
    states = [s.value for s in services.REVIEW_STATES]
    if state and state not in states:
        raise HttpError(400, f"state must be one of {', '.join(states)}.")
    captions = Caption.objects.filter(assignment__hit__batch=batch).select_related(
        "assignment__worker"
    )
    if state:
        captions = captions.filter(assignment__state=state)
    paginator, current = page_or_404(captions.order_by("created_at", "id"), page, per_page)
    items = [
        {
            **{f: getattr(c, f) for f in ("id", "clip_id", "assignment_id", "text", "fixed_text")},
            "worker": c.assignment.worker.get_username(),
            "state": c.assignment.state,
            "created_at": c.created_at,
        }
        for c in current
    ]
    return {"count": paginator.count, "page": page, "pages": paginator.num_pages, "items": items}


# Work (the worker's own assignments) ----------------------------------------------------


class _ClipOut(TypedDict):
    id: int
    duration_seconds: float
    peaks: list[float]
    hints: list[dict[str, Any]]


def _clips_with_hints(hit_id: int) -> list[_ClipOut]:
    """The HIT's clips in order, only the fields the page needs (a clip row also holds its
    media paths and metadata), each with its word hints as the HIT page shows them: each
    word label ("dog", or the label's own name when it has none) with the ontology labels
    it stands for, sorted. One query in plain SQL, a row per clip and label: every claim
    runs it, and the clips then a prefetch of labels with their word labels cost two
    queries and ≈ 1.5 ms of Python there."""
    links = Clip.labels.through._meta.db_table
    label_table, word_table = Label._meta.db_table, WordLabel._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id, c.start_seconds, c.end_seconds, c.duration_seconds, c.peaks, "
            f"l.name, l.description, w.name "
            f"FROM {HitClip._meta.db_table} hc JOIN {Clip._meta.db_table} c ON c.id = hc.clip_id "
            f"LEFT JOIN {links} cl ON cl.clip_id = c.id "
            f"LEFT JOIN {label_table} l ON l.id = cl.label_id "
            f"LEFT JOIN {word_table} w ON w.id = l.word_label_id "
            "WHERE hc.hit_id = %s ORDER BY hc.position, l.name",
            [hit_id],
        )
        rows = cursor.fetchall()
    clips: list[_ClipOut] = []
    words: dict[int, dict[str, list[dict[str, str]]]] = {}
    for clip_id, start, end, duration, peaks, name, description, word in rows:
        if not clips or clips[-1]["id"] != clip_id:
            peaks = json.loads(peaks) if isinstance(peaks, str) else peaks  # JSON as text
            clips.append(
                {
                    "id": clip_id,
                    "duration_seconds": duration or float(end - start),
                    "peaks": peaks or [],
                    "hints": [],
                }
            )
            words[clip_id] = {}
        if name is not None:
            # the rule of Label.word, on raw rows
            words[clip_id].setdefault(word or name, []).append(
                {"name": name, "description": description}
            )
    for clip in clips:
        by_word = words[clip["id"]]
        clip["hints"] = [{"word": w, "labels": labels} for w, labels in sorted(by_word.items())]
    return clips


def _work_out(assignment: Assignment) -> dict[str, Any]:
    batch = assignment.hit.batch
    hit_clips = _clips_with_hints(assignment.hit_id)
    # only this assignment's captions, the worker's own; an open one has none yet
    mine: dict[int, str] = {}
    if assignment.state != Assignment.State.ACCEPTED:
        mine = dict(Caption.objects.filter(assignment=assignment).values_list("clip_id", "text"))
    clips = []
    for number, clip in enumerate(hit_clips, start=1):
        clips.append(
            {
                **clip,
                "number": number,
                "audio_url": reverse("api-1:work_clip_audio", args=[assignment.pk, clip["id"]]),
                "caption": mine.get(clip["id"]),
            }
        )
    return {
        **{f: getattr(assignment, f) for f in ("id", "state", "accepted_at", "deadline")},
        **{f: getattr(assignment, f) for f in ("submitted_at", "reviewed_at", "feedback")},
        "batch": {
            **{f: getattr(batch, f) for f in ("id", "name", "mode", "reward_cents")},
            "time_allotted_seconds": _seconds(batch.time_allotted),
            "min_words": batch.min_words,
            "max_words": batch.max_words,
        },
        "guidance": rules.guidance(services.caption_limits(batch)),
        "clips": clips,
    }


@router.post(
    "/work/claim",
    response={200: WorkAssignmentOut, 201: WorkAssignmentOut, 204: None, 403: BlockedOut,
              404: ErrorOut},
    throttle=[throttling.WORK],
)  # fmt: skip
def work_claim(request: HttpRequest, batch: int | None = None) -> Any:
    """The next HIT for you: 201 with a new assignment, 200 with the one you already hold
    (one at a time), 204 when nothing is open to you, 403 with the reasons when every
    project you annotate has blocked you. `batch` limits the claim to one batch; 403
    with the reasons when you miss its requirements (locale, approval record,
    qualification)."""
    worker = signed_in_user(request)
    chosen = None
    if batch is not None:
        annotated = Membership.objects.filter(user=worker, role=Role.ANNOTATOR)
        chosen = Batch.objects.filter(pk=batch, project__in=annotated.values("project_id")).first()
        if chosen is None:
            raise HttpError(404, f"No batch #{batch} for you.")
    now = timezone.now()
    assignment = services.hit_claim(worker=worker, batch=chosen, now=now)
    if assignment is None:
        if blocked_everywhere(worker=worker):
            reasons = [f"{b.project.name}: {b.reason}" for b in blocks_of(worker=worker)]
            return Status(403, {"detail": "You are blocked from all your projects.",
                                "reasons": reasons})  # fmt: skip
        if chosen is not None and (refusals := requirements_refusals(worker=worker, batch=chosen)):
            return Status(403, {"detail": f"Batch #{chosen.pk} is not open to you.",
                                "reasons": refusals})  # fmt: skip
        return Status(204, None)
    if assignment.accepted_at == now:  # new: created with its HIT and batch at hand
        return Status(201, _work_out(assignment))
    return Status(200, _work_out(_mine(request, assignment.pk)))


@router.get("/work/assignments", response=list[WorkAssignmentBriefOut])
def work_assignments(request: HttpRequest, state: str = "") -> Any:
    """Your assignments, newest first (the latest 200)."""
    if state and state not in Assignment.State.values:
        raise HttpError(400, f"state must be one of {', '.join(Assignment.State.values)}.")
    rows = Assignment.objects.filter(worker=signed_in_user(request)).select_related("hit__batch")
    if state:
        rows = rows.filter(state=state)
    return [_brief_out(a) for a in rows[:MAX_MINE]]


def _brief_out(assignment: Assignment) -> dict[str, Any]:
    return {
        **{f: getattr(assignment, f) for f in ("id", "state", "accepted_at", "submitted_at")},
        "feedback": assignment.feedback,
        "batch": assignment.hit.batch.name,
        "reward_cents": assignment.hit.batch.reward_cents,
    }


@router.get("/work/summary", response=WorkSummaryOut)
def work_summary(request: HttpRequest) -> Any:
    """Your own record and earnings (rewards of approved HITs plus bonuses)."""
    summary = services.worker_summary(worker=signed_in_user(request))
    return {
        **{f: getattr(summary, f) for f in ("submitted", "approved", "rejected")},
        **{f: getattr(summary, f) for f in ("earned_cents", "pending_cents", "bonus_cents")},
        "approval_percent": summary.approval_percent,
        "total_cents": summary.total_cents,
    }


@router.get("/work/assignments/{assignment_id}", response={200: WorkAssignmentOut, 404: ErrorOut})
def work_assignment(request: HttpRequest, assignment_id: int) -> Any:
    return _work_out(_mine(request, assignment_id))


def _audio_checked_key(request: HttpRequest) -> list[str]:
    match = request.resolver_match
    clip_id = str(match.kwargs.get("clip_id", "")) if match is not None else ""
    return [audio_check_key(int(clip_id))] if clip_id.isdigit() else []


# The API's rate per user (throttling.PER_USER), which also reads whether the clip's file
# passed its header check (curation.services.clip_media): one cache round trip a GET.
AUDIO_RATES = throttling.Rates(("API_RATE_PER_USER", "user"), prefetch=_audio_checked_key)


@router.get(
    "/work/assignments/{assignment_id}/clips/{clip_id}/audio",
    response={200: None, 404: ErrorOut},
    url_name="work_clip_audio",
    throttle=[AUDIO_RATES],
)
def work_clip_audio(request: HttpRequest, assignment_id: int, clip_id: int) -> HttpResponseBase:
    """The clip's audio (Range requests answered with 206), for the assignment's worker
    and only for clips of its HIT. Fetch each clip before captioning it: submit refuses
    a caption until every byte of the clip was served (in one answer or in ranges) and its
    playing time has passed since it was first served."""
    found = _clip_of_mine(request, assignment_id, clip_id)
    if found is None:
        _mine(request, assignment_id)  # 404 when the assignment is not the worker's
        raise HttpError(404, f"Clip {clip_id} is not part of assignment #{assignment_id}.")
    clip, state, held = found

    def served(part: ByteRange) -> None:
        # a submit's captions are refused until the clip could have played through; the
        # record is written until it holds the whole file, and never again after
        if state == Assignment.State.ACCEPTED:
            services.clip_audio_served_unless_held(
                assignment=Assignment(pk=assignment_id), clip=clip, held=held, part=part
            )

    try:
        # the throttle read whether the file's header passed, in its own round trip
        clip_audio_check(clip=clip, cached=throttling.prefetched(request))
        return media_response(request, clip.audio, missing=NO_AUDIO_YET, on_served=served)
    except (ClipMediaBroken, Http404) as exc:
        raise HttpError(404, str(exc)) from None


@router.post(
    "/work/assignments/{assignment_id}/submit",
    response={200: WorkAssignmentBriefOut, 400: FieldErrorsOut, 404: ErrorOut, 409: ErrorOut},
    throttle=[throttling.WORK],
)
def work_submit(request: HttpRequest, assignment_id: int, payload: SubmitIn) -> Any:
    """Submits one caption per clip, checked by the HIT page's rules (the same messages);
    nothing is stored when any caption is refused. 409 when the assignment is no longer
    open (already submitted, or its time ran out: it then goes back to the pool). Sending
    the same captions again after they were stored (a retry whose first answer was lost)
    answers 200 with the assignment as stored, storing nothing twice.
    Then claim the next HIT: a "submit and next" loop is these two calls."""
    # The service re-reads the assignment under its lock and refuses another worker's:
    # reading it here first as well would cost a query on every submit.
    try:
        assignment = services.assignment_submit(
            assignment=Assignment(pk=assignment_id),
            worker=signed_in_user(request),
            captions=payload.captions,
        )
    except PermissionDenied:
        raise HttpError(404, f"No assignment #{assignment_id} of yours.") from None
    except ValidationError as exc:
        return refusal(exc)
    return _brief_out(assignment)


@router.post(
    "/work/assignments/{assignment_id}/return",
    response={200: WorkAssignmentBriefOut, 404: ErrorOut, 409: ErrorOut},
)
def work_return(request: HttpRequest, assignment_id: int) -> Any:
    """Gives the HIT back unsubmitted; its slot goes back to the pool."""
    assignment = _mine(request, assignment_id)
    try:
        assignment = services.assignment_return(
            assignment=assignment, worker=signed_in_user(request)
        )
    except ValidationError as exc:
        return Status(409, {"detail": error_text(exc)})
    return _brief_out(assignment)
