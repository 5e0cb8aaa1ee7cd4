"""The signals annotation sends at the points of an assignment's life that other apps build
on, so those apps react without annotation importing them: active records caption edits and
checks disagreement on a submit; postprocessing cleans the captions of an approval."""

from __future__ import annotations

from django.dispatch import Signal

# Both are sent with `assignment` inside the service's transaction, once the state change is
# stored: a receiver's writes commit or roll back with it, and its error propagates to the
# caller (send, not send_robust), so work meant for after the commit is queued with
# transaction.on_commit by the receiver itself.

# assignment_submit: the worker's captions are stored.
assignment_submitted = Signal()

# assignment_review with approve=True (a reviewer's or the batch's auto-approval).
assignment_approved = Signal()
