"""The assignment engine: claim, submit, return, review and expiry of HIT assignments.

Slots: a HIT wants `max_assignments` captions of each of its clips; `Hit.taken` counts the
assignments holding a slot. A claim takes a slot with a conditional F() increment on a row
it has locked; every release (returned, expired, rejected) gives it back with an F()
decrement. The check constraint 0 <= taken <= max_assignments makes over-filling an
IntegrityError even if this code were wrong.

Locking: on PostgreSQL a claim locks its HIT with SELECT … FOR UPDATE SKIP LOCKED, so
workers racing for the top of the queue spread over the next HITs instead of waiting in
line; assignment transitions lock the assignment row first. SQLite has no row locks, but
every atomic() block there starts with BEGIN IMMEDIATE (settings), which serialises
writers: slower, equally correct.

On PostgreSQL the common cases run without a transaction around several statements: a
claim by a worker holding no assignment is one statement (_one_statement_claim_sql), and a
submit of an open assignment is one read then one write that re-checks, as it writes, what
the read found (_submit_in_one_statement). Anything else (a held or late assignment, a
block, a change between read and write) takes the locked path below, as SQLite always does.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, connections, router, transaction
from django.db.models import F, Model, QuerySet
from django.utils import timezone

from annotation import rules
from annotation.models import (
    Assignment,
    Batch,
    Caption,
    ClipAudioServed,
    ClipReport,
    Hit,
    HitClip,
    Platform,
    PlatformRef,
)
from annotation.signals import SUBMIT_WRITES_IF, assignment_approved, assignment_submitted
from core.models import Membership, Role
from core.services import require_role
from crowd.models import Block
from crowd.queries import hits_open_to
from crowd.records import review_record
from curation.models import Clip

EXPIRE_CHUNK = 500

M = TypeVar("M", bound=Model)


def claimable_hits(
    *, worker: User | int, now: datetime, batch: Batch | None = None
) -> QuerySet[Hit]:
    """HITs the worker may take now, best first: open batches of projects where the worker
    annotates, with a free slot, none of whose clips the worker already holds, did or had
    rejected (in any batch), and none of whose clips' stored audio broke since it was
    published (Clip.media_broken_at)."""
    annotated = Membership.objects.filter(user=worker, role=Role.ANNOTATOR).values("project_id")
    worked_clips = HitClip.objects.filter(
        hit__assignments__worker=worker, hit__assignments__state__in=Assignment.BLOCKING
    ).values("clip_id")
    # clips the worker reported as broken are never offered to them again
    reported_clips = ClipReport.objects.filter(worker=worker).values("clip_id")
    # NOT IN (uncorrelated) rather than NOT EXISTS: PostgreSQL hashes the blocked HITs
    # once per claim instead of probing the worker's history once per candidate HIT.
    # Two NOT INs, not one with an OR inside: the OR made PostgreSQL scan every HitClip
    # row (10 ms a claim at 50,000 clips); apart, each walks the clip_id index.
    worked_hits = HitClip.objects.filter(clip_id__in=worked_clips).values("hit_id")
    reported_hits = HitClip.objects.filter(clip_id__in=reported_clips).values("hit_id")
    # the partial index clip_media_broken holds only these few clips
    broken_clips = Clip.objects.filter(media_broken_at__isnull=False).values("pk")
    broken_hits = HitClip.objects.filter(clip_id__in=broken_clips).values("hit_id")
    hits = (
        Hit.objects.filter(
            batch__state=Batch.State.PUBLISHED,
            batch__expires_at__gt=now,
            batch__project__in=annotated,
            taken__lt=F("max_assignments"),
            # a crowd platform hands out the HITs of a batch on it (annotation.platforms)
            batch__platform=Platform.LOCAL,
        )
        .exclude(pk__in=worked_hits)
        .exclude(pk__in=reported_hits)
        .exclude(pk__in=broken_hits)
    )
    if batch is not None:
        hits = hits.filter(batch=batch)
    # blocks and batch requirements (qualifications, approval rate and count)
    hits = hits_open_to(hits, worker=worker)
    return hits.order_by("-priority", "id")


# claimable_hits() compiled once per process and database, with these stand-ins for the
# worker, the batch and the time; a claim then only swaps in its own values. Building and
# compiling the query costs ~6 ms of Python a claim, against ~0.4 ms for PostgreSQL to
# run it. The stand-ins are values no row or constant of the query can hold.
_ANY_WORKER = -7_301_000_001
_ANY_BATCH = -7_301_000_002
_ANY_TIME = datetime(1901, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)


@functools.cache
def _claim_sql(alias: str, one_batch: bool) -> tuple[str, tuple[Any, ...]]:
    """SELECT id … LIMIT 1 FOR UPDATE OF the HIT SKIP LOCKED, and its parameters with the
    stand-ins in them."""
    hits = claimable_hits(
        worker=_ANY_WORKER, now=_ANY_TIME, batch=Batch(pk=_ANY_BATCH) if one_batch else None
    )
    query = hits.select_for_update(skip_locked=True, of=("self",)).values_list("pk")[:1].query
    # the compiler refuses FOR UPDATE outside a transaction; compiling runs no query (and
    # inside a caller's transaction, makes no savepoint)
    with transaction.atomic(using=alias, savepoint=False):
        sql, params = query.get_compiler(using=alias).as_sql()
    # A stand-in the compiler turned into another value would make every claim run with
    # it; fail loudly instead (once per process).
    time_param = Batch._meta.get_field("expires_at").get_db_prep_value(
        _ANY_TIME, connections[alias]
    )
    wanted = [_ANY_WORKER, time_param] + ([_ANY_BATCH] if one_batch else [])
    if missing := [value for value in wanted if value not in params]:
        raise RuntimeError(f"the claim query lost its stand-ins {missing}; see _claim_sql")
    return sql, tuple(params)


def _claim_params(
    *, alias: str, worker: User, now: datetime, batch: Batch | None
) -> tuple[str, list[Any]]:
    """_claim_sql's statement and its parameters for this worker, time and batch."""
    connection = connections[alias]
    sql, template = _claim_sql(alias, batch is not None)
    prep = Batch._meta.get_field("expires_at").get_db_prep_value
    values = {
        _ANY_WORKER: worker.pk,
        _ANY_BATCH: batch.pk if batch is not None else None,
        prep(_ANY_TIME, connection): prep(now, connection),
    }
    return sql, [values.get(p, p) if isinstance(p, int | str | datetime) else p for p in template]


def _claimable_hit_id(*, worker: User, now: datetime, batch: Batch | None) -> int | None:
    """The id of the first of claimable_hits(), locked; None when there is none."""
    alias = router.db_for_write(Hit)
    sql, params = _claim_params(alias=alias, worker=worker, now=now, batch=batch)
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return row[0] if row else None


# What _claim_in_one_statement answers when the worker already holds an assignment.
_HOLDS_ONE: Any = object()


def _columns(model: type[Model], table: str) -> str:
    return ", ".join(f"{table}.{f.column}" for f in model._meta.concrete_fields)


def _instance(model: type[M], alias: str, values: Sequence[Any]) -> M:
    """A model instance from its concrete fields' raw values, in field order, converted as
    the ORM converts them (JSON text, SQLite's dates …)."""
    connection = connections[alias]
    fields = model._meta.concrete_fields
    converted = []
    for field, value in zip(fields, values, strict=True):
        col = field.get_col(model._meta.db_table)
        for convert in connection.ops.get_db_converters(col) + col.get_db_converters(connection):
            value = convert(value, col, connection)
        converted.append(value)
    return model.from_db(alias, [f.attname for f in fields], converted)


@functools.cache
def _one_statement_claim_sql(alias: str, one_batch: bool) -> str:
    """The whole claim as one PostgreSQL statement: unless the worker holds an accepted
    assignment, the first claimable HIT locked (SKIP LOCKED: PostgreSQL re-checks
    `taken < max` on the row it locks), the assignment inserted unless the worker opened
    one meanwhile (ON CONFLICT on assignment_one_open: nothing inserted, nothing raised),
    and the HIT's slot taken for it (the check constraint on `taken` is the last word).
    One row back: the worker's current assignment's id (or NULL), the picked HIT's id (or
    NULL), then the new assignment, its HIT and its batch (NULLs when none was opened).
    One statement is one transaction: no BEGIN, COMMIT or savepoint, and nothing of it
    stays when any part fails."""
    claim, _ = _claim_sql(alias, one_batch)
    assignments, hits, batches = (
        Assignment._meta.db_table,
        Hit._meta.db_table,
        Batch._meta.db_table,
    )
    inserted = [f.column for f in Assignment._meta.concrete_fields if f.column != "id"]
    if inserted != [
        "hit_id", "worker_id", "state", "accepted_at", "deadline",
        "submitted_at", "reviewed_at", "released_at", "feedback",
    ]:  # fmt: skip
        raise RuntimeError(f"Assignment's columns changed ({inserted}); see this statement")
    return (
        f"WITH held AS (SELECT id FROM {assignments} WHERE worker_id = %s AND state = %s), "
        f"pick AS (SELECT p.pk FROM ({claim}) p WHERE NOT EXISTS (SELECT 1 FROM held)), "
        f"made AS (INSERT INTO {assignments} ({', '.join(inserted)}) "
        "SELECT h.id, %s, %s, %s, %s + b.time_allotted, NULL, NULL, NULL, '' "
        f"FROM pick JOIN {hits} h ON h.id = pick.pk JOIN {batches} b ON b.id = h.batch_id "
        "ON CONFLICT (worker_id) WHERE state = 'accepted' DO NOTHING RETURNING *), "
        f"took AS (UPDATE {hits} h SET taken = h.taken + 1 FROM made "
        "WHERE h.id = made.hit_id RETURNING h.*) "
        "SELECT (SELECT id FROM held LIMIT 1), (SELECT pk FROM pick), "
        f"{_columns(Assignment, 'm')}, {_columns(Hit, 't')}, {_columns(Batch, 'b')} "
        "FROM (SELECT 1) one LEFT JOIN made m ON TRUE LEFT JOIN took t ON t.id = m.hit_id "
        f"LEFT JOIN {batches} b ON b.id = t.batch_id"
    )


def _claim_in_one_statement(
    *, alias: str, worker: User, now: datetime, batch: Batch | None
) -> Assignment | None:
    """hit_claim for a worker holding no assignment, in one statement
    (_one_statement_claim_sql): the new assignment with its HIT and batch, None when no HIT
    is open to them, _HOLDS_ONE when they hold an accepted assignment (or opened one in
    another request meanwhile)."""
    connection = connections[alias]
    _, claim_params = _claim_params(alias=alias, worker=worker, now=now, batch=batch)
    accepted = Assignment.State.ACCEPTED
    when = Batch._meta.get_field("expires_at").get_db_prep_value(now, connection)
    params = [worker.pk, accepted, *claim_params, worker.pk, accepted, when, when]
    with connection.cursor() as cursor:
        cursor.execute(_one_statement_claim_sql(alias, batch is not None), params)
        row = cursor.fetchone()
    held, picked, *values = row
    if held is not None:
        return _HOLDS_ONE
    if picked is None:
        return None
    if values[0] is None:  # the worker opened one in another request meanwhile
        return _HOLDS_ONE
    return _with_hit_and_batch(alias, values)


# The columns of an assignment, its HIT and its batch, as _columns writes them.
_WITH_HIT_AND_BATCH = sum(len(m._meta.concrete_fields) for m in (Assignment, Hit, Batch))


def _with_hit_and_batch(alias: str, values: Sequence[Any]) -> Assignment:
    """The assignment, with its HIT and batch, from the first _WITH_HIT_AND_BATCH values."""
    n_assignment, n_hit = len(Assignment._meta.concrete_fields), len(Hit._meta.concrete_fields)
    assignment = _instance(Assignment, alias, values[:n_assignment])
    assignment.hit = _instance(Hit, alias, values[n_assignment : n_assignment + n_hit])
    assignment.hit.batch = _instance(
        Batch, alias, values[n_assignment + n_hit : _WITH_HIT_AND_BATCH]
    )
    return assignment


def hit_claim(
    *, worker: User, batch: Batch | None = None, now: datetime | None = None
) -> Assignment | None:
    """The worker's current assignment, or a new one on the best HIT they may do, or None.

    One HIT at a time: a worker holding an accepted assignment gets it back, whichever
    `batch` is asked for. A current assignment whose time ran out is expired here rather
    than waiting for the periodic sweep, so a worker is never stuck behind it.
    """
    now = now or timezone.now()
    alias = router.db_for_write(Hit)
    if connections[alias].vendor == "postgresql":
        opened = _claim_in_one_statement(alias=alias, worker=worker, now=now, batch=batch)
        if opened is not _HOLDS_ONE:
            return opened
        # the worker holds an assignment: given back, or expired and another claimed, below
    try:
        with transaction.atomic():
            current = _open_assignment(worker, lock=True)
            if current is not None and not current.is_late(now):
                return current
            if current is not None:
                slot_release(current, Assignment.State.EXPIRED, now)
            # LIMIT 1 … FOR UPDATE SKIP LOCKED: a HIT another claim is filling right now is
            # passed over for the next one; PostgreSQL re-checks `taken < max` on the row
            # it locks, so a HIT filled meanwhile is passed over too.
            hit_id = _claimable_hit_id(worker=worker, now=now, batch=batch)
            if hit_id is None:
                return None
            return _assignment_open(hit_id=hit_id, worker=worker, now=now)
    except IntegrityError:
        # The same worker claimed in another request meanwhile (assignment_one_open):
        # that claim won, and it is the worker's current assignment.
        current = _open_assignment(worker, lock=False)
        if current is None:
            raise
        return current


# Every claim runs the statements below, so they are written in SQL rather than built by
# the ORM, whose query building cost more Python time (≈ 0.3 to 1 ms each) than PostgreSQL
# takes to run them. The tables and columns are the models'; annotation's tests cover them.


def _open_assignment(worker: User, *, lock: bool) -> Assignment | None:
    """The worker's accepted assignment (at most one: assignment_one_open), row-locked
    when `lock` is set and the database can."""
    table = Assignment._meta.db_table
    alias = router.db_for_write(Assignment)
    for_update = " FOR UPDATE" if lock and connections[alias].features.has_select_for_update else ""
    rows = Assignment.objects.db_manager(alias).raw(
        f"SELECT * FROM {table} WHERE worker_id = %s AND state = %s{for_update}",
        [worker.pk, Assignment.State.ACCEPTED],
    )
    return next(iter(rows), None)


def _assignment_open(*, hit_id: int, worker: User, now: datetime) -> Assignment | None:
    """Takes a slot of the (locked) HIT and opens the worker's assignment on it; None when
    the HIT turned out to be full."""
    alias = router.db_for_write(Hit)
    # belt and braces: the conditional increment re-checks the free slot itself
    taken = Hit.objects.db_manager(alias).raw(
        f"UPDATE {Hit._meta.db_table} SET taken = taken + 1 "
        "WHERE id = %s AND taken < max_assignments RETURNING *",
        [hit_id],
    )
    hit = next(iter(taken), None)
    if hit is None:
        return None
    hit.batch = next(
        iter(
            Batch.objects.db_manager(alias).raw(
                f"SELECT * FROM {Batch._meta.db_table} WHERE id = %s",
                [hit.batch_id],
            )
        )
    )
    assignment = Assignment(
        hit=hit, worker=worker, accepted_at=now, deadline=now + hit.batch.time_allotted
    )
    assignment.save(force_insert=True, using=alias)
    return assignment


def slot_release(assignment: Assignment, state: str, now: datetime) -> None:
    """Moves a locked assignment to a released state and gives its HIT the slot back.
    The UPDATE takes the HIT's row lock, so concurrent claims and releases serialise."""
    assignment.move_to(state, now=now)
    Hit.objects.filter(pk=assignment.hit_id).update(taken=F("taken") - 1)


def assignment_locked(assignment: Assignment) -> Assignment:
    """The assignment re-read under its row lock, with its HIT, batch and project."""
    # Only the assignment's row: locking the joined HIT and batch too (FOR UPDATE without
    # OF) made every submit of a batch wait on its one batch row.
    return (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("hit__batch__project")
        .get(pk=assignment.pk)
    )


def caption_limits(batch: Batch) -> rules.Limits:
    return rules.Limits(
        min_words=batch.min_words, max_words=batch.max_words, max_chars=Caption.MAX_CHARS
    )


def caption_problem(text: str, *, min_words: int, max_words: int) -> str | None:
    """Why a (trimmed) caption is refused, or None: the first problem of the text gate
    (annotation.rules.gate: the rules the HIT page also checks as the worker types, on the
    text as typed and on its normal form). The text is stored raw."""
    limits = rules.Limits(min_words=min_words, max_words=max_words, max_chars=Caption.MAX_CHARS)
    errors = rules.gate(text, limits)
    return errors[0].message if errors else None


def assignment_submit(
    *, assignment: Assignment, worker: User, captions: dict[int, str], now: datetime | None = None
) -> Assignment:
    """Stores one caption per clip of the HIT and marks the assignment submitted.

    Refused (ValidationError, nothing stored) when a clip lacks a caption, a caption is
    refused by caption_problem, a clip's audio was not served to this assignment long
    enough ago to have been heard to the end (ClipAudioServed; the HIT page, the API and
    the MTurk page record it as they serve the audio), the time ran out, or the worker was
    blocked from the project since taking the HIT; in those last two cases the assignment
    is expired or returned and its slot released.

    Idempotent: the same captions sent again once stored (the answer to the first submit
    was lost to a dropped connection, a killed web process, a browser's resend) return
    the assignment as stored, writing nothing; other captions are refused, as any submit
    of an assignment no longer open.
    """
    now = now or timezone.now()
    alias = router.db_for_write(Assignment)
    if connections[alias].vendor == "postgresql":
        submitted = _submit_in_one_statement(
            alias=alias, assignment=assignment, worker=worker, captions=captions, now=now
        )
        if submitted is not None:
            return submitted
        # not open, late, blocked, another's, or changed meanwhile: decided under the lock
    late = False
    blocked_for: str | None = None
    with transaction.atomic():
        # the worker's own assignment, locked; someone else's is refused before any write
        assignment = _locked_own(assignment, worker)
        if assignment.state != Assignment.State.ACCEPTED and _repeats_stored(assignment, captions):
            return assignment
        if assignment.state == Assignment.State.ACCEPTED and assignment.is_late(now):
            slot_release(assignment, Assignment.State.EXPIRED, now)
            late = True
        elif assignment.state == Assignment.State.ACCEPTED and (
            blocked_for := getattr(assignment.hit.batch, "worker_blocked_for", None)
        ):
            # a block stops the HIT already held too, not only the next claim
            slot_release(assignment, Assignment.State.RETURNED, now)
        else:
            texts = _checked_captions(assignment, captions, now)
            assignment.move_to(Assignment.State.SUBMITTED, now=now)
            Caption.objects.bulk_create(
                Caption(assignment=assignment, clip_id=clip_id, text=text, created_at=now)
                for clip_id, text in texts.items()
            )
            # active records edit distances to the suggestions shown (edit mode) and queues
            # flag checks on commit
            assignment_submitted.send(sender=Assignment, assignment=assignment)
    if late:
        raise ValidationError("The time allotted for this HIT ran out; it went back to the pool.")
    if blocked_for is not None:
        raise ValidationError(
            "You are blocked from this project's HITs, so this one was not submitted and went "
            f"back to the pool. The reason given: {blocked_for}",
            code="blocked",
        )
    return assignment


def _locked_own(assignment: Assignment, worker: User) -> Assignment:
    """The worker's assignment re-read under its row lock, with its HIT and batch (the
    project loads on first use); PermissionDenied when it is not the worker's. The batch
    carries `worker_blocked_for`: the reason of the worker's active block on the batch's
    project, or None. In SQL, like the claim's statements: every submit runs it (the ORM's
    select_related query took ≈ 1 ms of Python to build)."""
    alias = router.db_for_write(Assignment)
    for_update = " FOR UPDATE" if connections[alias].features.has_select_for_update else ""
    found = Assignment.objects.db_manager(alias).raw(
        f"SELECT * FROM {Assignment._meta.db_table} WHERE id = %s AND worker_id = %s{for_update}",
        [assignment.pk, worker.pk],
    )
    locked = next(iter(found), None)
    if locked is None:
        raise PermissionDenied("This is another worker's assignment.")
    locked.hit = next(
        iter(
            Hit.objects.db_manager(alias).raw(
                f"SELECT * FROM {Hit._meta.db_table} WHERE id = %s",
                [locked.hit_id],
            )
        )
    )
    batches, blocks = Batch._meta.db_table, Block._meta.db_table
    locked.hit.batch = next(
        iter(
            Batch.objects.db_manager(alias).raw(
                f"SELECT b.*, (SELECT k.reason FROM {blocks} k WHERE k.project_id = b.project_id"
                " AND k.worker_id = %s AND k.lifted_at IS NULL) AS worker_blocked_for"
                f" FROM {batches} b WHERE b.id = %s",
                [worker.pk, locked.hit.batch_id],
            )
        )
    )
    return locked


def _submit_in_one_statement(
    *, alias: str, assignment: Assignment, worker: User, captions: dict[int, str], now: datetime
) -> Assignment | None:
    """assignment_submit's common case in two statements and no transaction around them:
    the worker's open assignment read with its HIT, batch, block and clips (each with
    whether it was heard through), the captions checked, then one statement that moves it
    to submitted and inserts the captions, on the conditions the read found true (open, in
    time, not blocked, every clip heard) checked again as it writes: a change meanwhile
    makes it write nothing. The submitted assignment; None when there is anything but that
    to decide (no such assignment of the worker's, not open, late, blocked, a condition
    changed meanwhile), which the locked path then decides. ValidationError, nothing
    stored, when the captions are refused."""
    connection = connections[alias]
    tables = {
        "assignments": Assignment._meta.db_table,
        "hits": Hit._meta.db_table,
        "batches": Batch._meta.db_table,
        "blocks": Block._meta.db_table,
        "hit_clips": HitClip._meta.db_table,
        "served": ClipAudioServed._meta.db_table,
    }
    when = connection.ops.adapt_datetimefield_value(now)
    writes = [f"({sql}) AS {_quoted(name)}" for name, sql in SUBMIT_WRITES_IF.items()]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_columns(Assignment, 'a')}, {_columns(Hit, 'h')}, {_columns(Batch, 'b')}, "
            f"(SELECT k.reason FROM {tables['blocks']} k WHERE k.project_id = b.project_id "
            "AND k.worker_id = a.worker_id AND k.lifted_at IS NULL), "
            "hc.clip_id, COALESCE(s.whole_at IS NOT NULL AND s.earliest_heard_at <= %s, FALSE)"
            + "".join(f", {w}" for w in writes)
            + f" FROM {tables['assignments']} a JOIN {tables['hits']} h ON h.id = a.hit_id "
            f"JOIN {tables['batches']} b ON b.id = h.batch_id "
            f"JOIN {tables['hit_clips']} hc ON hc.hit_id = a.hit_id "
            f"LEFT JOIN {tables['served']} s ON s.assignment_id = a.id AND s.clip_id = hc.clip_id "
            "WHERE a.id = %s AND a.worker_id = %s ORDER BY hc.position",
            [when, assignment.pk, worker.pk],
        )
        rows = cursor.fetchall()
    if not rows:
        return None
    found = _with_hit_and_batch(alias, rows[0])
    rest = rows[0][_WITH_HIT_AND_BATCH:]
    blocked_for = rest[0]
    found.submit_writes = dict(zip(SUBMIT_WRITES_IF, rest[3:], strict=True))  # type: ignore[attr-defined]
    if found.state != Assignment.State.ACCEPTED or found.is_late(now) or blocked_for is not None:
        return None
    heard = [row[_WITH_HIT_AND_BATCH + 1 : _WITH_HIT_AND_BATCH + 3] for row in rows]
    texts = _captions_checked(found, captions, heard)
    if any(found.submit_writes.values()):  # type: ignore[attr-defined]
        return None  # a receiver writes with the captions: in one transaction, below
    values = ", ".join(["(%s::bigint, %s::text)"] * len(texts))
    inserted = [f.column for f in Caption._meta.concrete_fields if f.column != "id"]
    if inserted != [
        "provenance", "assignment_id", "clip_id", "imported_into_id", "text",
        "external_id", "fixed_text", "fixed_by_id", "fixed_at", "created_at", "pending_review",
    ]:  # fmt: skip
        raise RuntimeError(f"Caption's columns changed ({inserted}); see this statement")
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH moved AS (UPDATE {tables['assignments']} a SET state = %s, submitted_at = %s "
            "WHERE a.id = %s AND a.worker_id = %s AND a.state = %s AND a.deadline > %s "
            f"AND NOT EXISTS (SELECT 1 FROM {tables['blocks']} k JOIN {tables['batches']} b "
            "ON k.project_id = b.project_id WHERE b.id = %s AND k.worker_id = a.worker_id "
            "AND k.lifted_at IS NULL) "
            f"AND NOT EXISTS (SELECT 1 FROM {tables['hit_clips']} hc "
            f"LEFT JOIN {tables['served']} s ON s.assignment_id = a.id AND s.clip_id = hc.clip_id "
            "WHERE hc.hit_id = a.hit_id "
            "AND NOT COALESCE(s.whole_at IS NOT NULL AND s.earliest_heard_at <= %s, FALSE)) "
            "RETURNING a.id) "
            f"INSERT INTO {Caption._meta.db_table} ({', '.join(inserted)}) "
            "SELECT %s, m.id, v.clip_id, NULL, v.text, '', '', NULL, NULL, %s, FALSE "
            f"FROM moved m CROSS JOIN (VALUES {values}) v (clip_id, text) RETURNING id",
            [
                Assignment.State.SUBMITTED, when, found.pk, worker.pk,
                Assignment.State.ACCEPTED, when, found.hit.batch_id, when,
                Caption.Provenance.CROWD, when,
                *(value for pair in texts.items() for value in pair),
            ],
        )  # fmt: skip
        stored = cursor.fetchall()
    if len(stored) != len(texts):
        return None  # changed since the read (submitted, returned, expired, blocked)
    found.state, found.submitted_at = Assignment.State.SUBMITTED, now
    # right after the statement that stored the captions (signals.SUBMIT_WRITES_IF)
    assignment_submitted.send(sender=Assignment, assignment=found)
    return found


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _repeats_stored(assignment: Assignment, captions: dict[int, str]) -> bool:
    """Whether `captions` are, trimmed as a submit stores them, exactly the assignment's
    stored captions: one per clip, the same texts."""
    stored = dict(Caption.objects.filter(assignment=assignment).values_list("clip_id", "text"))
    given = {int(clip_id): rules.trim(text or "") for clip_id, text in captions.items()}
    return bool(stored) and stored == given


def _checked_captions(
    assignment: Assignment, captions: dict[int, str], now: datetime
) -> dict[int, str]:
    """The captions trimmed, one per clip of the HIT; ValidationError naming each clip
    whose caption the rules refuse or whose audio the worker cannot have heard through."""
    if assignment.state != Assignment.State.ACCEPTED:
        raise ValidationError(
            f"This assignment is already {assignment.get_state_display().lower()}."
        )
    # the HIT's clips in order, each with whether its whole audio was served long enough
    # ago to have been heard through (ClipAudioServed); the database compares the times
    alias = router.db_for_read(HitClip)
    served = ClipAudioServed._meta.db_table
    with connections[alias].cursor() as cursor:
        cursor.execute(
            f"SELECT h.clip_id, s.whole_at IS NOT NULL AND s.earliest_heard_at <= %s "
            f"FROM {HitClip._meta.db_table} h LEFT JOIN {served} s "
            "ON s.assignment_id = %s AND s.clip_id = h.clip_id "
            "WHERE h.hit_id = %s ORDER BY h.position",
            [
                connections[alias].ops.adapt_datetimefield_value(now),
                assignment.pk,
                assignment.hit_id,
            ],
        )
        rows = cursor.fetchall()
    return _captions_checked(assignment, captions, rows)


def _captions_checked(
    assignment: Assignment, captions: dict[int, str], rows: Sequence[Sequence[Any]]
) -> dict[int, str]:
    """_checked_captions on the HIT's clips in order, each as (clip id, heard through)."""
    batch = assignment.hit.batch
    clip_ids = [clip_id for clip_id, _ in rows]
    given = {int(clip_id): text for clip_id, text in captions.items()}
    errors: dict[str, list[str]] = {}
    if unknown := sorted(set(given) - set(clip_ids)):
        errors["__all__"] = [f"Clips {unknown} are not part of this HIT."]
    texts: dict[int, str] = {}
    limits = caption_limits(batch)
    for number, (clip_id, heard) in enumerate(rows, start=1):
        text = rules.trim(given.get(clip_id) or "")
        clip_errors = [] if heard else [f"Listen to clip {number} to the end first."]
        clip_errors += [
            f"The caption for clip {number} {problem.message}."
            for problem in rules.gate(text, limits)
        ]
        if clip_errors:
            errors[f"caption-{clip_id}"] = clip_errors
        texts[clip_id] = text
    if errors:
        raise ValidationError(errors)
    return texts


def assignment_return(
    *, assignment: Assignment, worker: User, now: datetime | None = None
) -> Assignment:
    """The worker gives the HIT back without submitting; its slot goes back to the pool."""
    if assignment.worker_id != worker.pk:
        raise PermissionDenied("This is another worker's assignment.")
    with transaction.atomic():
        assignment = assignment_locked(assignment)
        slot_release(assignment, Assignment.State.RETURNED, now or timezone.now())
    return assignment


def assignment_review(
    *,
    assignment: Assignment,
    reviewer: User | None,
    approve: bool,
    feedback: str = "",
    reason: str = "",
    now: datetime | None = None,
    by_platform: bool = False,
) -> Assignment:
    """Approves or rejects a submitted assignment. A rejection re-opens its slot, for
    another worker: the rejected worker is kept off those clips. `reviewer` None is the
    batch's auto-approval, or with `by_platform` a crowd platform's verdict (trusted
    callers); `reason` is a crowd.models.RejectReason. A submission a platform has not
    yet confirmed as its worker's (PlatformRef.confirmed_at) is not approved. The
    decision and, for an approval, the worker's reward are recorded in the same
    transaction (crowd.records)."""
    if reviewer is None and not approve and not by_platform:
        raise ValidationError("Only a reviewer can reject an assignment.")
    if reviewer is not None:
        require_role(assignment.hit.batch.project, reviewer, Role.RESEARCHER, Role.REVIEWER)
    if approve and submissions_provisional().filter(local_id=assignment.pk).exists():
        raise ValidationError(
            "The crowd platform has not yet confirmed who submitted this work; it can be "
            "approved once it has (checked every few minutes).",
            code="provisional",
        )
    now = now or timezone.now()
    with transaction.atomic():
        assignment = assignment_locked(assignment)
        if approve:
            assignment.move_to(Assignment.State.APPROVED, now=now, feedback=feedback)
            assignment_approved.send(sender=Assignment, assignment=assignment)
        else:
            assignment.move_to(Assignment.State.REJECTED, now=now, feedback=feedback)
            Hit.objects.filter(pk=assignment.hit_id).update(taken=F("taken") - 1)
        review_record(
            assignment=assignment,
            reviewer=reviewer,
            approve=approve,
            reason=reason,
            feedback=feedback,
            now=now,
        )
    return assignment


def submissions_provisional() -> QuerySet[PlatformRef]:
    """Platform submissions not yet confirmed as their worker's: nothing approves them."""
    return PlatformRef.objects.filter(kind=PlatformRef.Kind.ASSIGNMENT, confirmed_at__isnull=True)


def assignments_expire(*, now: datetime | None = None) -> int:
    """Expires accepted assignments past their deadline and releases their slots; returns
    how many. Rows another transaction holds (a submit in flight) are left for the next
    sweep, and each chunk commits on its own so no sweep holds many locks for long."""
    now = now or timezone.now()
    expired = 0
    while True:
        with transaction.atomic():
            stale = list(
                Assignment.objects.select_for_update(skip_locked=True)
                .filter(state=Assignment.State.ACCEPTED, deadline__lte=now)
                .order_by("deadline", "id")
                .values_list("pk", "hit_id")[:EXPIRE_CHUNK]
            )
            Assignment.objects.filter(pk__in=[pk for pk, _ in stale]).update(
                state=Assignment.State.EXPIRED, released_at=now
            )
            per_hit: dict[int, int] = {}
            for _, hit_id in stale:
                per_hit[hit_id] = per_hit.get(hit_id, 0) + 1
            # in id order, so two sweeps never wait on each other's HITs crosswise
            for hit_id in sorted(per_hit):
                Hit.objects.filter(pk=hit_id).update(taken=F("taken") - per_hit[hit_id])
        expired += len(stale)
        if len(stale) < EXPIRE_CHUNK:
            return expired
