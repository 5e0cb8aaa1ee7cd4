"""The signal annotation sends when a worker submits, so the apps built on it (active's
caption edits and flag checks) react without annotation importing them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent with `assignment` by assignment_submit inside its transaction, once the captions
# are stored: a receiver's writes commit or roll back with the submit, and its error
# propagates to the submitter (send, not send_robust), so work meant for after the commit
# is queued with transaction.on_commit by the receiver itself.
assignment_submitted = Signal()
