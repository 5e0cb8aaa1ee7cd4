"""Reading a project's approved captions for exports and statistics: the read
transaction they run in, and the captions streamed as rows, one at a time or grouped by
clip."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count

from core.models import Project
from corpus import formats, queries
from corpus.models import Snapshot

EXPORT_CHUNK = 2000


@contextmanager
def export_reads() -> Iterator[None]:
    """Around the export's and statistics' big reads. On PostgreSQL they run in a
    transaction with JIT off: the OR of crowd joins and the import EXISTS is estimated
    costly enough to be JIT-compiled, which took 2.3 s of a 3.1 s query over 50k captions
    (the query itself runs in 0.8 s). SQLite needs nothing (and a transaction there
    would take the write lock)."""
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
        yield


# The columns every writer reads, in this order.
_ROW = (
    "pk",
    "external_id",
    "provenance",
    "text",
    "fixed_text",
    "clip_id",
    "clip__source",
    "clip__youtube_id",
    "clip__start_seconds",
    "clip__end_seconds",
    "clip__original_name",
    "clip__audio",
)
_PROCESSED = ("processed__final_text", "processed__train_text", "processed__tokens")


@dataclass(frozen=True)
class CaptionRow:
    """One approved caption with its clip, as the export writers and statistics read it."""

    caption_id: int
    external_id: str
    provenance: str
    raw: str  # the text as written, with a reviewer's fix applied
    clip_id: int
    source: str
    youtube_id: str
    start: Decimal
    end: Decimal
    original_name: str
    audio: str
    processed: str | None
    train_text: str | None
    tokens: list[str] | None
    labels: list[str]  # the clip's AudioSet mids, when asked for

    def text(self, which: str) -> str:
        if which != Snapshot.Text.PROCESSED:
            return self.raw
        if self.processed is None:  # processed rows were checked: this one went meanwhile
            raise ValidationError(
                f"Caption {self.caption_id} lost its processed text during the export; "
                "export again."
            )
        return self.processed

    @property
    def audiocap_id(self) -> str:
        return self.external_id or str(self.caption_id)

    @property
    def file_name(self) -> str:
        """The Clotho file name of the clip: a local file's own name, else "<id>_<start>.wav"."""
        if self.original_name:
            return self.original_name
        return f"{self.youtube_id}_{formats.seconds_text(self.start)}.wav"


def _rows(qs: Any, *, processed: bool, labels: bool = False) -> Any:
    if labels:
        qs = qs.annotate(label_mids=queries.clip_label_mids())
    extra = (*(_PROCESSED if processed else ()), *(("label_mids",) if labels else ()))
    return qs.values_list(*_ROW, *extra)


def _as_row(values: tuple[Any, ...], *, processed: bool, labels: bool = False) -> CaptionRow:
    pk, ext, provenance, text, fixed, clip_id, source, ytid, start, end, name, audio = values[:12]
    final, train, tokens = values[12:15] if processed else (None, None, None)
    mids = sorted(values[-1].split(",")) if labels and values[-1] else []
    return CaptionRow(
        pk,
        ext,
        provenance,
        fixed or text,
        clip_id,
        source,
        ytid,
        start,
        end,
        name,
        audio or "",
        final,
        train,
        tokens,
        mids,
    )


def split_rows(project: Project, split: str, *, labels: bool = False) -> Iterator[CaptionRow]:
    """The split's approved captions in id order, streamed."""
    processed = queries.processed_available()
    rows = _rows(queries.approved_captions(project, split), processed=processed, labels=labels)
    return (
        _as_row(values, processed=processed, labels=labels)
        for values in rows.iterator(chunk_size=EXPORT_CHUNK)
    )


def clip_grouped_rows(
    project: Project, split: str, *, labels: bool = False
) -> Iterator[list[CaptionRow]]:
    """The split's captions grouped by clip (clips in the order of their first caption,
    each clip's captions in id order), streamed: one clip in memory at a time."""
    captions = queries.by_clip(queries.approved_captions(project, split))
    processed = queries.processed_available()
    rows = _rows(captions, processed=processed, labels=labels)
    group: list[CaptionRow] = []
    for values in rows.iterator(chunk_size=EXPORT_CHUNK):
        row = _as_row(values, processed=processed, labels=labels)
        if group and group[0].clip_id != row.clip_id:
            yield group
            group = []
        group.append(row)
    if group:
        yield group


def clotho_width(project: Project, split: str) -> int:
    """The most captions any clip of the split has: the Clotho file's caption columns."""
    per_clip = (
        queries.approved_captions(project, split)
        .order_by()
        .values("clip_id")
        .annotate(n=Count("pk"))
        .values_list("n", flat=True)
    )
    return max(per_clip.iterator(chunk_size=EXPORT_CHUNK), default=0)
