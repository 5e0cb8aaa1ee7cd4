"""The active-learning loop, one module per workflow: config (the settings rows), ranking
(a batch's HITs by usefulness), flags (disagreement checks on submitted captions),
suggestions (pre-suggestions and the edits made to them), retraining (retrain, promote only
if better), curve (learning curves) and labelstudio (the Label Studio connection).

Scores come from active/scoring.py (pure); these modules read the rows they need and write
the results. Every public name is re-exported here, so `from active import services` and
`from active.services import X` keep working; a module of this package imports its
siblings directly, never this package.
"""

from __future__ import annotations

from active.services.config import batch_config, project_config, project_configure
from active.services.curve import curve_import, curve_series
from active.services.flags import (
    CORPUS_CLIPS,
    assignment_flag_job,
    assignment_submitted,
    batch_flag_job,
    batch_flag_rate,
    captions_flag,
    flag_thresholds,
    flags_sweep,
)
from active.services.labelstudio import (
    ImportOutcome,
    annotation_texts,
    clip_id_value,
    labelstudio_annotation_save,
    labelstudio_annotations_delete,
    labelstudio_config,
    labelstudio_import,
    labelstudio_secret_matches,
    labelstudio_secret_rotate,
    labelstudio_tasks,
    labelstudio_upload_read,
    task_clip_id,
    textarea_names,
)
from active.services.ranking import (
    COMMITTEE_RUNS,
    batch_configure,
    batch_rank,
    batch_rank_job,
    batches_rank,
    clip_labels,
    promoted_run,
)
from active.services.retraining import (
    METRIC,
    approved_caption_count,
    retrain_due,
    retrain_execute,
    retrain_execute_job,
    retrain_run_finished,
    retrain_start,
    retrain_watch,
    run_promote_if_better,
    validation_score,
)
from active.services.suggestions import (
    caption_edits_record,
    edit_stats,
    presuggested_texts,
    project_suggest,
    project_suggest_job,
    suggestions_for_review,
)

__all__ = [
    "COMMITTEE_RUNS",
    "CORPUS_CLIPS",
    "METRIC",
    "ImportOutcome",
    "annotation_texts",
    "approved_caption_count",
    "assignment_flag_job",
    "assignment_submitted",
    "batch_config",
    "batch_configure",
    "batch_flag_job",
    "batch_flag_rate",
    "batch_rank",
    "batch_rank_job",
    "batches_rank",
    "caption_edits_record",
    "captions_flag",
    "clip_id_value",
    "clip_labels",
    "curve_import",
    "curve_series",
    "edit_stats",
    "flag_thresholds",
    "flags_sweep",
    "labelstudio_annotation_save",
    "labelstudio_annotations_delete",
    "labelstudio_config",
    "labelstudio_import",
    "labelstudio_secret_matches",
    "labelstudio_secret_rotate",
    "labelstudio_tasks",
    "labelstudio_upload_read",
    "presuggested_texts",
    "project_config",
    "project_configure",
    "project_suggest",
    "project_suggest_job",
    "promoted_run",
    "retrain_due",
    "retrain_execute",
    "retrain_execute_job",
    "retrain_run_finished",
    "retrain_start",
    "retrain_watch",
    "run_promote_if_better",
    "suggestions_for_review",
    "task_clip_id",
    "textarea_names",
    "validation_score",
]
