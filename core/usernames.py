"""Usernames a person may choose.

Names starting with a reserved prefix are given by the site itself: annotation.platforms.mturk
names the account of each MTurk worker `mturk-<WorkerId>`. A person signing up as
`mturk-A1…` would pass for that worker on the review and worker pages, so every form
that sets a username refuses them. Identity never comes from the name: the MTurk worker
id lives in annotation.MTurkWorker, and the name is only a label.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError

MTURK_PREFIX = "mturk-"
RESERVED_PREFIXES = (MTURK_PREFIX,)


def username_reserved_check(username: str) -> None:
    """ValidationError when `username` starts with a reserved prefix (in any case: the
    pages show `MTurk-A1` and `mturk-A1` alike)."""
    for prefix in RESERVED_PREFIXES:
        if username.lower().startswith(prefix):
            raise ValidationError(
                f"Usernames starting with “{prefix}” are reserved for Amazon Mechanical Turk "
                "workers' accounts, which the site makes itself; please choose another.",
                code="reserved",
            )
