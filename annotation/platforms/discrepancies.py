"""Recording what a platform's reconciliation found (crowd.LedgerDiscrepancy), rerun-safe.

Each run of a platform's periodic reconciliation says what differs now. A difference
still found keeps its row (and when it was first found); one no longer found goes; a new
one gets a row. So a difference is listed once however often the job runs, and the list
on the ledger page is what the platform's records say now. A project whose records the
platform could not give this run keeps its rows as they were.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from annotation.models import Platform
from crowd.models import LedgerDiscrepancy

Key = tuple[int, int | None, int | None, str]


def _key(found: LedgerDiscrepancy) -> Key:
    return (found.project_id, found.assignment_id, found.entry_id, found.problem)


def discrepancies_record(
    *, platform: Platform, found: Iterable[LedgerDiscrepancy], unchecked: Iterable[int] = ()
) -> int:
    """Makes `platform`'s discrepancies those `found`, except in the `unchecked` projects
    (left as they were). Returns how many differences stand for the checked projects."""
    unchecked = set(unchecked)
    wanted: dict[Key, LedgerDiscrepancy] = {}
    for difference in found:
        if difference.project_id not in unchecked:
            difference.platform = platform
            wanted.setdefault(_key(difference), difference)
    with transaction.atomic():
        standing = (
            LedgerDiscrepancy.objects.select_for_update()
            .filter(platform=platform)
            .exclude(project_id__in=unchecked)
            .order_by("pk")
        )
        kept: set[Key] = set()
        gone = []
        for row in standing:
            key = _key(row)
            if key in wanted and key not in kept:
                kept.add(key)
            else:
                gone.append(row.pk)
        LedgerDiscrepancy.objects.filter(pk__in=gone).delete()
        LedgerDiscrepancy.objects.bulk_create([d for k, d in wanted.items() if k not in kept])
    return len(wanted)
