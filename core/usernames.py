"""Usernames a person may choose.

Names starting with a reserved prefix are given by the site itself: annotation.platforms.mturk
names the account of each MTurk worker `mturk-<WorkerId>`, and
annotation.platforms.prolific each Prolific participant's `prolific-<PID>`. A person signing up as
`mturk-A1…` would pass for that worker on the review and worker pages, so every form
that sets a username refuses them. Identity never comes from the name: the MTurk worker
id lives in annotation.MTurkWorker, a participant's in annotation.PlatformRef, and the
name is only a label.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError

MTURK_PREFIX = "mturk-"
PROLIFIC_PREFIX = "prolific-"  # annotation.platforms.prolific: a participant's account
# prefix -> whose accounts the site makes under it
RESERVED_PREFIXES = {
    MTURK_PREFIX: "Amazon Mechanical Turk workers",
    PROLIFIC_PREFIX: "Prolific participants",
}


def username_reserved_check(username: str) -> None:
    """ValidationError when `username` starts with a reserved prefix (in any case: the
    pages show `MTurk-A1` and `mturk-A1` alike)."""
    for prefix, whose in RESERVED_PREFIXES.items():
        if username.lower().startswith(prefix):
            raise ValidationError(
                f"Usernames starting with “{prefix}” are reserved for {whose}' accounts, "
                "which the site makes itself; please choose another.",
                code="reserved",
            )
