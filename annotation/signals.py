"""The signals annotation sends at the points of an assignment's life that other apps build
on, so those apps react without annotation importing them: active records caption edits and
checks disagreement on a submit; postprocessing cleans the captions of an approval."""

from __future__ import annotations

from django.dispatch import Signal

# Both are sent with `assignment` inside the service's transaction (but see SUBMIT_WRITES_IF
# below), once the state change is stored: a receiver's writes commit or roll back with it,
# and its error propagates to the caller (send, not send_robust), so work meant for after
# the commit is queued with transaction.on_commit by the receiver itself.

# assignment_submit: the worker's captions are stored.
assignment_submitted = Signal()

# assignment_review with approve=True (a reviewer's or the batch's auto-approval).
assignment_approved = Signal()

# A receiver of assignment_submitted that writes for some assignments only (active: edit
# distances, when suggestions were shown) names them here, as a boolean SQL expression over
# the assignment's row `a`. A submit for which every registered expression is false stores
# its captions in one statement, its own transaction, and sends assignment_submitted right
# after it (annotation.services.assignments); otherwise it sends it inside the transaction,
# as above. Receivers find each value as assignment.submit_writes[name]. Registered in an
# AppConfig.ready(); registering again replaces.
SUBMIT_WRITES_IF: dict[str, str] = {}


def submit_writes_register(*, name: str, sql: str) -> None:
    SUBMIT_WRITES_IF[name] = sql
