"""Which captions make a project's corpus, split by split.

"Approved captions" are crowd captions of the project's batches whose assignment was
approved (split: the batch's) plus the captions imported into the project and not waiting
for a reviewer (Label Studio's), on clips of its import subsets (split: the clip's in that
subset). Another project's imported captions on
the same AudioSet clip are never part of it. Ordered by caption id, an export lists captions
in the order they were created — for an imported file, the file's own order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.core.exceptions import FieldDoesNotExist
from django.db.models import (
    Aggregate,
    CharField,
    Exists,
    F,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    Window,
)
from django.db.models.functions import Coalesce, NullIf

from annotation.models import Assignment, Caption
from core.models import Project
from curation.models import Clip, Subset, SubsetClip

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler


def import_subsets(project: Project) -> QuerySet[Subset]:
    return Subset.objects.filter(project=project, corpus_imports__isnull=False).distinct()


def approved_captions(project: Project, split: str) -> QuerySet[Caption]:
    """The approved captions of one split of the project's corpus, ordered by id."""
    crowd = Q(
        provenance=Caption.Provenance.CROWD,
        assignment__state=Assignment.State.APPROVED,
        assignment__hit__batch__project=project,
        assignment__hit__batch__split=split,
    )
    # EXISTS, not a join: a clip in several subsets must not repeat its captions
    in_import = SubsetClip.objects.filter(
        subset__in=import_subsets(project).values("pk"), clip=OuterRef("clip_id"), split=split
    )
    imported = Q(
        provenance=Caption.Provenance.IMPORTED, imported_into=project, pending_review=False
    ) & Exists(in_import)
    return Caption.objects.filter(crowd | imported).order_by("pk")


def by_clip(captions: QuerySet[Caption]) -> QuerySet[Caption]:
    """The captions with each clip's together: clips in the order of their first caption,
    a clip's captions in id order (Clotho's one row per clip)."""
    first = Window(Min("pk"), partition_by=[F("clip_id")])
    return captions.annotate(clip_first=first).order_by("clip_first", "pk")


def unprocessed(captions: QuerySet[Caption]) -> QuerySet[Caption]:
    """Captions without post-processed text for their current text: never processed, or
    fixed by a reviewer after (ProcessedCaption.source_text is the text it processed)."""
    current = Coalesce(NullIf(F("fixed_text"), Value("")), F("text"))
    return captions.filter(Q(processed__isnull=True) | ~Q(processed__source_text=current))


class _Joined(Aggregate):
    """Values of a group joined with commas (GROUP_CONCAT; STRING_AGG on PostgreSQL)."""

    function = "GROUP_CONCAT"
    template = "%(function)s(%(expressions)s)"
    output_field = CharField()

    def as_postgresql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any
    ) -> tuple[str, Sequence[Any]]:
        return self.as_sql(
            compiler,
            connection,
            function="STRING_AGG",
            template="%(function)s(%(expressions)s, ',')",
        )


def clip_label_mids() -> Subquery:
    """Per caption: its clip's AudioSet label mids, comma-separated in no set order (None
    when the clip has no labels). One correlated subquery, so a streamed export needs no
    second lookup per chunk of captions."""
    links = Clip.labels.through.objects.filter(clip_id=OuterRef("clip_id"))
    joined = links.order_by().values("clip_id").annotate(mids=_Joined("label__mid"))
    # django-stubs forgets an annotation made after values(), so it rejects "mids"
    return Subquery(joined.values("mids")[:1])  # type: ignore[misc]


def processed_available() -> bool:
    """Whether post-processing's ProcessedCaption (Caption.processed) is installed."""
    try:
        Caption._meta.get_field("processed")
    except FieldDoesNotExist:
        return False
    return True
