"""The registry of job kinds: name -> what runs it and on which queue.

A handler is a service function `handler(*, job: Job, progress: Progress, **params) -> dict`;
the dict it returns is stored as the job's result. Handlers are named by dotted path and
imported only when a job runs, so heavy modules (torch) never load at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any


@dataclass(frozen=True)
class JobKind:
    label: str
    handler: str  # dotted path to the service function
    queue: str  # default | media | text | gpu
    # Running it again after its runner died gives the same outcome (it reads and rewrites
    # its own results); such a job whose runner was lost goes back to its queue (at most
    # JOB_MAX_ATTEMPTS executions) instead of failing. Kinds that publish, charge or import
    # outside data once (MTurk, archives, exports) stay False.
    rerun_safe: bool = False

    def load(self) -> Any:
        module, _, name = self.handler.rpartition(".")
        return getattr(import_module(module), name)


JOB_KINDS: dict[str, JobKind] = {
    "ontology_import": JobKind(
        "Import AudioSet ontology",
        "curation.services.ontology.ontology_import_job",
        "default",
        rerun_safe=True,
    ),
    "segments_import": JobKind(
        "Import AudioSet segments", "curation.services.segments.segments_import_job", "default"
    ),
    "subset_build": JobKind(
        "Build subset", "curation.services.subsets.subset_build_job", "default"
    ),
    "clips_import_local": JobKind(
        "Import local audio", "curation.services.local_import.clips_import_local_job", "media"
    ),
    "clips_fetch": JobKind("Fetch clips", "curation.services.fetching.clips_fetch_job", "media"),
    "weights_import": JobKind(
        "Import released weights", "modeling.weights.weights_import_job", "gpu", rerun_safe=True
    ),
    "synthscenes_make": JobKind(
        "Make SynthScenes", "modeling.services_synth.synthscenes_make_job", "media"
    ),
    "captions_postprocess": JobKind(
        "Post-process captions", "postprocessing.services.captions_postprocess_job", "text"
    ),
    "vocabulary_rebuild": JobKind(
        "Rebuild vocabulary",
        "postprocessing.services.vocabulary_rebuild_job",
        "text",
        rerun_safe=True,
    ),
    "clips_import_archive": JobKind(
        "Import an audio archive",
        "curation.services.local_import.clips_import_archive_job",
        "media",
    ),
    "captions_import": JobKind(
        "Import captions", "corpus.services.imports.captions_import_job", "default"
    ),
    "snapshot_build": JobKind(
        "Export snapshot", "corpus.services.snapshots.snapshot_build_job", "default"
    ),
    "corpus_statistics": JobKind(
        "Corpus statistics",
        "corpus.services.statistics.statistics_compute_job",
        "text",
        rerun_safe=True,
    ),
    "captions_evaluate": JobKind(
        "Evaluate captions", "corpus.evaluation_services.evaluation_job", "text", rerun_safe=True
    ),
    "captions_human_bound": JobKind(
        "Human upper bound", "corpus.evaluation_services.human_bound_job", "text", rerun_safe=True
    ),
    "training_run": JobKind("Train a captioner", "modeling.training.run_execute_job", "gpu"),
    "clips_caption": JobKind(
        "Suggest captions for clips", "modeling.suggestions.clips_caption_job", "gpu"
    ),
    "batch_rank": JobKind(
        "Rank a batch's HITs", "active.services.ranking.batch_rank_job", "default", rerun_safe=True
    ),
    "captions_flag": JobKind(
        "Check captions for disagreement",
        "active.services.flags.assignment_flag_job",
        "text",
        rerun_safe=True,
    ),
    "flag_model_build": JobKind(
        "Build flag model",
        "active.services.flags.flag_model_build_job",
        "text",
        rerun_safe=True,
    ),
    "flags_calibrate": JobKind(
        "Refit flag calibration",
        "active.services.calibration.flags_calibrate_job",
        "default",
        rerun_safe=False,
    ),
    "batch_flag": JobKind(
        "Check a batch's captions for disagreement",
        "active.services.flags.batch_flag_job",
        "text",
        rerun_safe=True,
    ),
    "active_retrain": JobKind(
        "Retrain and promote if better", "active.services.retraining.retrain_execute_job", "gpu"
    ),
    "active_suggest": JobKind(
        "Suggest captions for the project and re-rank",
        "active.services.suggestions.project_suggest_job",
        "gpu",
    ),
    "prolific_publish": JobKind(
        "Publish a batch on Prolific",
        "annotation.platforms.prolific.publish.batch_prolific_publish_job",
        "default",
    ),
    "mturk_publish": JobKind(
        "Publish a batch on MTurk",
        "annotation.platforms.mturk.publish.batch_mturk_publish_job",
        "default",
    ),
}


def job_kind(name: str) -> JobKind:
    try:
        return JOB_KINDS[name]
    except KeyError:
        known = ", ".join(sorted(JOB_KINDS))
        raise ValueError(f"Unknown job kind {name!r}; known kinds: {known}.") from None
