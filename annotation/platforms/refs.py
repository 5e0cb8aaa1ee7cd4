"""The ids Earmark's rows have on a crowd platform (annotation.PlatformRef), read and
written by the platform packages only: the core models carry no platform columns."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models
from django.db.models import QuerySet

from annotation.models import Platform, PlatformRef

Kind = PlatformRef.Kind


def ref_for(*, platform: Platform, kind: Kind, row: models.Model | int) -> PlatformRef | None:
    local_id = row if isinstance(row, int) else row.pk
    return PlatformRef.objects.filter(platform=platform, kind=kind, local_id=local_id).first()


def external_id(*, platform: Platform, kind: Kind, row: models.Model | int) -> str:
    """The row's id on the platform, "" while it has none."""
    ref = ref_for(platform=platform, kind=kind, row=row)
    return ref.external_id if ref is not None else ""


def external_ids(*, platform: Platform, kind: Kind, local_ids: Iterable[int]) -> dict[int, str]:
    return dict(
        PlatformRef.objects.filter(
            platform=platform, kind=kind, local_id__in=list(local_ids)
        ).values_list("local_id", "external_id")
    )


def local_id(*, platform: Platform, kind: Kind, external: str) -> int | None:
    """The pk of the row standing for the platform's `external` id, if any."""
    return (
        PlatformRef.objects.filter(platform=platform, kind=kind, external_id=external)
        .values_list("local_id", flat=True)
        .first()
    )


def ref_create(*, platform: Platform, kind: Kind, row: models.Model | int, external: str) -> None:
    local = row if isinstance(row, int) else row.pk
    PlatformRef.objects.create(platform=platform, kind=kind, local_id=local, external_id=external)


def refs(*, platform: Platform, kind: Kind) -> QuerySet[PlatformRef]:
    return PlatformRef.objects.filter(platform=platform, kind=kind)


def on_platform(*, platform: Platform, kind: Kind) -> QuerySet[PlatformRef, int]:
    """The pks of the rows of `kind` that have an id on the platform, as a subquery."""
    return refs(platform=platform, kind=kind).values_list("local_id", flat=True)
