"""Work given up on a platform: its local slot goes back to the HIT."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from annotation.models import Assignment


def released_there(assignment: Assignment, now: datetime) -> bool:
    """Frees the slot of a local assignment the platform no longer has in progress:
    returned by its worker there, or abandoned (its time there ran out). False when it
    left the accepted state meanwhile (submitted through the page, expired by the sweep)."""
    from annotation.services.assignments import assignment_locked, slot_release

    with transaction.atomic():
        locked = assignment_locked(assignment)
        if locked.state != Assignment.State.ACCEPTED:
            return False
        late = locked.is_late(now)
        slot_release(locked, Assignment.State.ABANDONED if late else Assignment.State.RETURNED, now)
    return True
