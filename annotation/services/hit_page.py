"""What the HIT page records while a worker works: clips heard, video hints opened,
clips reported as broken. Each checks the clip belongs to the worker's open assignment."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TypedDict

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connections, router, transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from annotation import rules
from annotation.models import (
    Assignment,
    ClipAudioServed,
    ClipListen,
    ClipReport,
    HitClip,
    VideoHintView,
)
from annotation.services.assignments import assignment_locked, slot_release
from core.media import ByteRange
from curation.models import Clip
from curation.services import clip_video_problem


def _clip_in_hit(assignment: Assignment, worker: User, clip_id: int) -> Clip:
    """The clip, when the worker holds this assignment open and the clip is in its HIT."""
    if assignment.worker_id != worker.pk:
        raise PermissionDenied("This is another worker's assignment.")
    if assignment.state != Assignment.State.ACCEPTED:
        raise ValidationError(
            f"This assignment is already {assignment.get_state_display().lower()}."
        )
    hit_clip = (
        HitClip.objects.select_related("clip")
        .filter(hit=assignment.hit_id, clip_id=clip_id)
        .first()
    )
    if hit_clip is None:
        raise ValidationError(f"Clip {clip_id} is not part of this HIT.")
    return hit_clip.clip


# The share of a clip that must play, in order, to count as heard (static/hit.js's
# HEARD_SHARE): the least time between serving its audio and hearing it through.
HEARD_SHARE = 0.95


def clip_seconds(clip: Clip) -> float:
    """The clip's length: measured when fetched, else its section's."""
    return clip.duration_seconds or float(clip.end_seconds - clip.start_seconds)


def clip_audio_served(
    *,
    assignment: Assignment,
    clip: Clip,
    part: ByteRange | None = None,
    now: datetime | None = None,
) -> None:
    """Records that bytes of the clip's audio were served for the assignment: `part` (the
    bytes an answer carried, core.media), the whole file when None. The first serving
    starts the clock: the clip cannot be heard through before HEARD_SHARE of its length
    has passed since, nor before the ranges served cover the whole file (whole_at).

    A whole file (a plain GET, or a player's "bytes=0-") is one statement, which writes
    nothing once the clip was served whole; a partial range merges into the row under its
    lock, until the ranges add up to the file."""
    now = now or timezone.now()
    playing = timedelta(seconds=HEARD_SHARE * clip_seconds(clip))
    if part is None or part.whole:
        _served_whole(assignment, clip, part.size if part else 0, now, playing)
        return
    with transaction.atomic():
        ClipAudioServed.objects.bulk_create(
            [
                ClipAudioServed(
                    assignment=assignment,
                    clip=clip,
                    served_at=now,
                    earliest_heard_at=now + playing,
                    file_bytes=part.size,
                )
            ],
            ignore_conflicts=True,
        )
        served = ClipAudioServed.objects.select_for_update().get(assignment=assignment, clip=clip)
        if served.whole_at is not None:
            return
        # a file replaced since (fetched again) starts over: its earlier bytes were another's
        earlier = served.ranges if served.file_bytes == part.size else []
        served.ranges = _merged([*earlier, [part.first, part.last]])
        served.file_bytes = part.size
        if served.ranges == [[0, part.size - 1]]:
            served.ranges = []
            served.whole_at = now
            served.earliest_heard_at = max(served.earliest_heard_at, now)
        served.save(update_fields=["ranges", "file_bytes", "whole_at", "earliest_heard_at"])


def audio_served_holds(
    *, whole: bool, file_bytes: int | None, ranges: list[list[int]] | None, part: ByteRange
) -> bool:
    """Whether a clip's served record, as read with the assignment (`whole`: its whole_at
    is set; else its merged `ranges` of a file of `file_bytes` bytes; all None/False when
    there is none), already holds every byte of `part`: clip_audio_served would then write
    nothing, and a replay or a player's range request need not call it. A record never
    loses what it holds (whole_at, once set, stays; ranges only grow for one file), so
    the answer cannot turn wrong before a later write; a record read as missing or short
    is written by clip_audio_served, whose statements settle two concurrent first GETs."""
    if whole:
        return True
    if not ranges or file_bytes != part.size:
        return False
    return any(first <= part.first and part.last <= last for first, last in ranges)


class AudioHeld(TypedDict):
    """A clip's served record as read with the clip (audio_served_holds): none yet reads
    as whole False, file_bytes and ranges None."""

    whole: bool
    file_bytes: int | None
    ranges: list[list[int]] | None


def clip_audio_served_unless_held(
    *, assignment: Assignment, clip: Clip, held: AudioHeld, part: ByteRange
) -> None:
    """clip_audio_served for the bytes an answer carried, unless the record as read with
    the clip (`held`) already holds them: the rule of every audio view (the HIT page's,
    the API's, the MTurk and Prolific pages'), so that a replay, or a player's range
    request inside what was served, writes nothing."""
    if not audio_served_holds(**held, part=part):
        clip_audio_served(assignment=assignment, clip=clip, part=part)


def hit_clips_served(*, assignment: Assignment) -> QuerySet[HitClip]:
    """The clips of the assignment's HIT (with their Clip), each with what the
    assignment's served record of it holds (audio_held), read in the one query that
    finds the clip: the pages' audio views then pass it to clip_audio_served_unless_held
    (a LEFT JOIN cannot reach the record from HitClip, so three subqueries on its unique
    (assignment, clip) index)."""
    served = ClipAudioServed.objects.filter(assignment=assignment.pk, clip=OuterRef("clip_id"))
    return (
        HitClip.objects.filter(hit=assignment.hit_id)
        .select_related("clip")
        .annotate(
            served_whole_at=Subquery(served.values("whole_at")),
            served_bytes=Subquery(served.values("file_bytes")),
            served_ranges=Subquery(served.values("ranges")),
        )
    )


def audio_held(hit_clip: HitClip) -> AudioHeld:
    """What the served record held, as hit_clips_served read it with the clip."""
    ranges = getattr(hit_clip, "served_ranges", None)
    return {
        "whole": getattr(hit_clip, "served_whole_at", None) is not None,
        "file_bytes": getattr(hit_clip, "served_bytes", None),
        "ranges": json.loads(ranges) if isinstance(ranges, str) else ranges,
    }


def _served_whole(
    assignment: Assignment, clip: Clip, size: int, now: datetime, playing: timedelta
) -> None:
    """The row of a clip served whole, in one INSERT … ON CONFLICT (every clip of every
    loop comes here: a SELECT then an INSERT cost two round trips and a savepoint); a row
    already whole is left as it is, one with some ranges becomes whole now."""
    alias = router.db_for_write(ClipAudioServed)
    connection = connections[alias]
    stamp = connection.ops.adapt_datetimefield_value
    table = ClipAudioServed._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (assignment_id, clip_id, served_at, earliest_heard_at, "
            "file_bytes, ranges, whole_at) VALUES (%s, %s, %s, %s, %s, '[]', %s) "
            "ON CONFLICT (assignment_id, clip_id) DO UPDATE SET whole_at = excluded.whole_at, "
            "ranges = excluded.ranges, file_bytes = excluded.file_bytes, earliest_heard_at = "
            f"CASE WHEN {table}.earliest_heard_at > excluded.whole_at "
            f"THEN {table}.earliest_heard_at ELSE excluded.whole_at END "
            f"WHERE {table}.whole_at IS NULL",
            [
                assignment.pk,
                clip.pk,
                stamp(now),
                stamp(now + playing),
                size,
                stamp(now),
            ],
        )


def _merged(ranges: list[list[int]]) -> list[list[int]]:
    """Inclusive [first, last] byte ranges merged: overlapping or adjacent ones joined."""
    out: list[list[int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], last)
        else:
            out.append([first, last])
    return out


def clip_heard(
    *, assignment: Assignment, worker: User, clip_id: int, now: datetime | None = None
) -> ClipListen:
    """Records that the worker heard the clip to the end; the caption box unlocks from it.
    Idempotent: the first time is kept. Refused while the clip's audio was not served to
    this assignment long enough ago to have played through."""
    now = now or timezone.now()
    clip = _clip_in_hit(assignment, worker, clip_id)
    served = ClipAudioServed.objects.filter(assignment=assignment, clip=clip).first()
    if served is None:
        raise ValidationError("This clip's audio was never loaded; play it on the HIT page.")
    if served.whole_at is None:
        raise ValidationError(
            "Only part of this clip's audio was loaded; play it to the end on the HIT page."
        )
    if served.earliest_heard_at > now:
        raise ValidationError("This clip has not played long enough to be heard to the end.")
    listen, _ = ClipListen.objects.get_or_create(
        assignment=assignment, clip=clip, defaults={"heard_at": now}
    )
    return listen


def video_hint_open(
    *, assignment: Assignment, worker: User, clip_id: int, now: datetime | None = None
) -> VideoHintView:
    """Logs that the worker opened the clip's video hint (first opening kept), which
    reviewers see; only then is the video served. Refused, with nothing logged, when the
    stored video is missing or empty: the worker would be recorded as having seen it."""
    clip = _clip_in_hit(assignment, worker, clip_id)
    if not clip.video:
        raise ValidationError("This clip has no video hint.")
    if problem := clip_video_problem(clip):
        raise ValidationError(f"The video hint cannot be shown: {problem}.")
    view, _ = VideoHintView.objects.get_or_create(
        assignment=assignment, clip=clip, defaults={"opened_at": now or timezone.now()}
    )
    return view


def clip_report(
    *,
    assignment: Assignment,
    worker: User,
    clip_id: int,
    problem: str,
    note: str = "",
    now: datetime | None = None,
) -> ClipReport:
    """Records a problem with a clip and returns the assignment, freeing its slot for
    someone else; claimable_hits never offers the clip to this worker again."""
    if problem not in ClipReport.Problem.values:
        raise ValidationError(
            {"problem": f"Unknown problem {problem!r}; use one of {ClipReport.Problem.values}."}
        )
    note = rules.trim(note)
    if len(note) > ClipReport.NOTE_MAX_CHARS:
        raise ValidationError(
            {"note": f"The note is {len(note):,} characters long; the limit is "
                     f"{ClipReport.NOTE_MAX_CHARS}."}
        )  # fmt: skip
    if unsafe := rules.unsafe_characters(note):
        raise ValidationError({"note": f"The note {unsafe.message}."})
    now = now or timezone.now()
    with transaction.atomic():
        assignment = assignment_locked(assignment)
        clip = _clip_in_hit(assignment, worker, clip_id)
        report, _ = ClipReport.objects.get_or_create(
            worker=worker,
            clip=clip,
            defaults={
                "assignment": assignment,
                "problem": problem,
                "note": note,
                "created_at": now,
            },
        )
        slot_release(assignment, Assignment.State.RETURNED, now)
    return report
