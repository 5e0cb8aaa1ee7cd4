"""Curation workflows, one module each: the ontology and labels (`ontology`), local and
archive imports (`local_import`), fetching YouTube clips (`fetching`), checking stored
clip media before it is served (`clip_media`), AudioSet segment lists (`segments`),
recipe files (`recipes`) and subsets (`subsets`).

Every public name is re-exported here, so `from curation.services import X` works; the
job handlers are named by their own module in core.jobs. A test that replaces a name
patches the module that looks it up (e.g. `curation.services.subsets._subset_chart`)."""

from __future__ import annotations

from curation.services.clip_media import (
    AUDIO_CHECK_TTL_SECONDS,
    ClipMediaBroken,
    audio_check_key,
    clip_audio_check,
    clip_audio_problem,
    clip_mark_broken,
    clip_video_problem,
)
from curation.services.fetching import (
    FETCH_POLL_SECONDS,
    FETCH_STALE_AFTER,
    FetchTicket,
    clip_fetch,
    clips_fetch,
    clips_fetch_job,
    subset_video_features_height,
)
from curation.services.local_import import (
    ARCHIVE_UPLOAD_DIR,
    MAX_LOCAL_SECONDS,
    archive_upload_store,
    clips_import_archive,
    clips_import_archive_job,
    clips_import_local,
    clips_import_local_job,
)
from curation.services.ontology import (
    label_counts_adjust,
    label_counts_refresh,
    label_curate,
    label_curations,
    label_flags_applied,
    label_flags_apply,
    ontology_import,
    ontology_import_job,
    word_labels_import,
    word_labels_loaded,
)
from curation.services.recipes import (
    RECIPE_FILE_MAX_BYTES,
    RESERVED_RECIPE_SLUGS,
    recipe_export,
    recipe_import,
    recipe_parse,
    recipe_save,
)
from curation.services.segments import (
    SEGMENT_BATCH,
    SEGMENT_STAGE,
    segments_import,
    segments_import_job,
)
from curation.services.subsets import (
    subset_build,
    subset_build_job,
    subset_captions_per_clip,
    subset_from_clips,
    subset_preview,
)

__all__ = [
    "ARCHIVE_UPLOAD_DIR",
    "AUDIO_CHECK_TTL_SECONDS",
    "FETCH_POLL_SECONDS",
    "FETCH_STALE_AFTER",
    "MAX_LOCAL_SECONDS",
    "RECIPE_FILE_MAX_BYTES",
    "RESERVED_RECIPE_SLUGS",
    "SEGMENT_BATCH",
    "SEGMENT_STAGE",
    "ClipMediaBroken",
    "FetchTicket",
    "archive_upload_store",
    "audio_check_key",
    "clip_audio_check",
    "clip_audio_problem",
    "clip_fetch",
    "clip_mark_broken",
    "clip_video_problem",
    "clips_fetch",
    "clips_fetch_job",
    "clips_import_archive",
    "clips_import_archive_job",
    "clips_import_local",
    "clips_import_local_job",
    "label_counts_adjust",
    "label_counts_refresh",
    "label_curate",
    "label_curations",
    "label_flags_applied",
    "label_flags_apply",
    "ontology_import",
    "ontology_import_job",
    "recipe_export",
    "recipe_import",
    "recipe_parse",
    "recipe_save",
    "segments_import",
    "segments_import_job",
    "subset_build",
    "subset_build_job",
    "subset_captions_per_clip",
    "subset_from_clips",
    "subset_preview",
    "subset_video_features_height",
    "word_labels_import",
    "word_labels_loaded",
]
