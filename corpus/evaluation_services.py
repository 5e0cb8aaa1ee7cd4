"""Evaluation workflows: score predictions, or the human upper bound, against references
given inline or taken from a project split's approved captions. The metrics themselves are
in corpus.evaluation (no Django); these are the job handlers and the database reads."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from core.models import Job, Project
from core.progress import ProgressFn
from corpus import evaluation, evaluation_java, queries
from corpus.evaluation_files import clip_key
from curation.models import Clip, Split


def evaluation_toolkit() -> evaluation_java.Toolkit:
    """pycocoevalcap's Java parts, run from VAR_DIR/cache (the package may be read-only)."""
    return evaluation_java.toolkit(settings.VAR_DIR / "cache", java=settings.JAVA_BINARY)


def split_references(*, project: Project, split: str) -> dict[str, list[str]]:
    """{clip key: [caption, ...]} of the split's approved captions (crowd captions of approved
    assignments, and imported ones), in the order they were created; the text is the
    reviewer's fix where there is one. Keys are those of corpus.evaluation_files: AudioSet
    clips "<youtube_id>_<start>", local clips their original file name."""
    if split not in Split.values:
        raise ValidationError(f"Unknown split {split!r}; choose from {', '.join(Split.values)}.")
    fields: tuple[str, ...] = ("pk", "clip__source", "clip__youtube_id", "clip__start_seconds")
    fields += ("clip__original_name", "clip_id", "text", "fixed_text")
    rows = queries.approved_captions(project, split).values_list(*fields)
    out: dict[str, list[str]] = {}
    owner: dict[str, int] = {}
    for _, source, youtube_id, start, name, clip_id, text, fixed in rows.iterator(2000):
        if source == Clip.Source.YOUTUBE:
            key = clip_key(youtube_id, start)
        else:
            key = name or f"clip-{clip_id}"
        if owner.setdefault(key, clip_id) != clip_id:
            key = f"{key}#clip-{clip_id}"  # two local files of one name: keep them apart
        out.setdefault(key, []).append(fixed or text)
    return out


def _references(
    job: Job, references: dict[str, list[str]] | None, split: str
) -> dict[str, list[str]]:
    if references is not None:
        return references
    if job.project is None:
        raise ValidationError("A split's references need the job's project.")
    found = split_references(project=job.project, split=split)
    if not found:
        raise ValidationError(
            f"The {split} split of {job.project.slug} has no approved captions to use as "
            "references."
        )
    return found


class _Stages:
    """Turns corpus.evaluation's stage names into job progress (done/total stages)."""

    def __init__(self, progress: ProgressFn, total: int) -> None:
        self.progress = progress
        self.total = total
        self.done = 0

    def __call__(self, stage: str) -> None:
        self.progress(min(self.done, self.total), self.total, stage)
        self.done += 1


def _stage_count(metrics: list[str] | None, rounds: int = 1) -> int:
    chosen = evaluation.families(metrics)
    return 1 + rounds * len(chosen)


def evaluation_run(
    *,
    predictions: dict[str, str],
    references: dict[str, list[str]],
    metrics: list[str] | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    stages = _Stages(progress, _stage_count(metrics)) if progress else None
    result = evaluation.evaluate(
        predictions=predictions,
        references=references,
        metrics=metrics,
        kit=evaluation_toolkit(),
        progress=stages,
    )
    return result.as_dict()


def human_bound_run(
    *,
    references: dict[str, list[str]],
    metrics: list[str] | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    rounds = max((len(refs) for refs in references.values()), default=0)
    stages = _Stages(progress, _stage_count(metrics, rounds)) if progress else None
    result = evaluation.human_upper_bound(
        references=references, metrics=metrics, kit=evaluation_toolkit(), progress=stages
    )
    return result.as_dict()


def evaluation_job(
    *,
    job: Job,
    progress: ProgressFn,
    predictions: dict[str, str],
    references: dict[str, list[str]] | None = None,
    split: str = "",
    metrics: list[str] | None = None,
) -> dict[str, Any]:
    """Handler of "captions_evaluate": predictions against inline references or a split."""
    refs = _references(job, references, split)
    result = evaluation_run(
        predictions=predictions, references=refs, metrics=metrics, progress=progress
    )
    return {**result, "split": split or None}


def human_bound_job(
    *,
    job: Job,
    progress: ProgressFn,
    references: dict[str, list[str]] | None = None,
    split: str = "",
    metrics: list[str] | None = None,
) -> dict[str, Any]:
    """Handler of "captions_human_bound": each reference against the clip's others."""
    refs = _references(job, references, split)
    result = human_bound_run(references=refs, metrics=metrics, progress=progress)
    return {**result, "split": split or None}
