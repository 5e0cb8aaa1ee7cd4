"""Corpus workflows, one module each: importing caption lists (`imports`), export
snapshots (`snapshots`, their audio in `snapshot_audio`, the sweep of what interrupted
builds leave in `janitor`) and corpus statistics (`statistics`); `rows` reads the approved
captions the last two share.

Every public name is re-exported here, so `from corpus.services import X` works; the job
handlers are named by their own module in core.jobs. A test that replaces a name patches
the module that looks it up (e.g. `corpus.services.statistics._pos_pipeline`)."""

from __future__ import annotations

from corpus.services.imports import (
    IMPORT_MAX_BYTES,
    LOOKUP_CHUNK,
    SUBSET_NAMES,
    captions_import,
    captions_import_job,
)
from corpus.services.janitor import snapshots_sweep
from corpus.services.rows import EXPORT_CHUNK
from corpus.services.snapshots import (
    snapshot_build,
    snapshot_build_job,
    snapshot_check,
    snapshot_create,
    snapshot_default_format,
    snapshot_file_chunks,
    snapshot_file_names,
    snapshot_label,
    snapshot_start,
)
from corpus.services.statistics import (
    CHARTS,
    statistics_chart,
    statistics_compute,
    statistics_compute_job,
)

__all__ = [
    "CHARTS",
    "EXPORT_CHUNK",
    "IMPORT_MAX_BYTES",
    "LOOKUP_CHUNK",
    "SUBSET_NAMES",
    "captions_import",
    "captions_import_job",
    "snapshot_build",
    "snapshot_build_job",
    "snapshot_check",
    "snapshot_create",
    "snapshot_default_format",
    "snapshot_file_chunks",
    "snapshot_file_names",
    "snapshot_label",
    "snapshot_start",
    "snapshots_sweep",
    "statistics_chart",
    "statistics_compute",
    "statistics_compute_job",
]
