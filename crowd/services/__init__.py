"""crowd's workflows, one module per topic, re-exported here so callers import
`crowd.services`:

- `review`: the review queue, approvals with fixes, rejections, auto-approval;
- `workers`: a project's workers, their records, blocks;
- `money`: bonuses and the ledger;
- `qualifications`: qualification tests and a batch's requirements.
"""

from __future__ import annotations

from crowd.services.money import (
    MAX_BONUS_CENTS,
    bonus_pay,
    bonuses_paid_there,
    ledger_csv,
    ledger_totals,
)
from crowd.services.qualifications import (
    MAX_QUALIFICATION_CLIPS,
    batch_requirements_set,
    qualification_create,
    qualification_grade,
    qualification_set_gold,
    qualification_submit,
    qualifications_for,
)
from crowd.services.review import (
    AUTO_APPROVE_CHUNK,
    assignments_auto_approve,
    imported_caption_review,
    imported_queue,
    review_approve,
    review_queue,
    review_reject,
    worker_approve_all,
)
from crowd.services.workers import (
    project_workers,
    worker_block,
    worker_of_project_check,
    worker_summaries,
    worker_summary,
    worker_unblock,
)

__all__ = [
    "AUTO_APPROVE_CHUNK",
    "MAX_BONUS_CENTS",
    "MAX_QUALIFICATION_CLIPS",
    "assignments_auto_approve",
    "batch_requirements_set",
    "bonus_pay",
    "bonuses_paid_there",
    "imported_caption_review",
    "imported_queue",
    "ledger_csv",
    "ledger_totals",
    "project_workers",
    "qualification_create",
    "qualification_grade",
    "qualification_set_gold",
    "qualification_submit",
    "qualifications_for",
    "review_approve",
    "review_queue",
    "review_reject",
    "worker_approve_all",
    "worker_block",
    "worker_of_project_check",
    "worker_summaries",
    "worker_summary",
    "worker_unblock",
]
