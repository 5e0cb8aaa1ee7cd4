"""Disagreement flags: a submitted caption checked against its clip's other captions, the
promoted run's suggestion and the word hints. Each finding becomes a crowd.Flag (through
crowd.records.flag_create), which puts the assignment at the front of the review queue,
and every caption looked at gets a FlagCheck. The checks run on submit
(ACTIVE_FLAG_ON_SUBMIT) or from the periodic sweep."""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet

from active import flagmodel, scoring
from active.models import FlagCheck
from active.services.calibration import project_calibration
from active.services.ranking import clip_labels, promoted_run
from active.services.suggestions import caption_edits_record
from annotation.models import Assignment, Batch, Caption
from core.models import Job, Project
from core.progress import ProgressFn
from core.services import job_enqueue
from crowd.records import flag_create
from modeling.models import Suggestion

CORPUS_CLIPS = 2000  # clips whose captions give CIDEr-D its document frequencies
MODEL_CLIPS = 100_000  # clips of the database's captions the flag model learns from at most

log = logging.getLogger(__name__)
_models: dict[Path, tuple[float, flagmodel.FlagModel]] = {}
_build_lock = threading.Lock()


def flag_model_path() -> Path:
    return Path(settings.ACTIVE_FLAG_MODEL_DIR) / f"flag-model-v{flagmodel.VERSION}.npz"


def _model_corpus() -> tuple[list[list[str]], list[dict[str, Any]], list[str]]:
    """(clips' captions, ontology classes, where they came from) for the flag model: the
    database's captions and labels plus the configured caption CSVs and ontology file."""
    from curation.models import Label

    clips: dict[int, list[str]] = defaultdict(list)
    rows = Caption.objects.order_by("clip_id", "pk").values_list("clip_id", "text", "fixed_text")
    for clip_id, text, fixed in rows.iterator():
        if len(clips) >= MODEL_CLIPS and clip_id not in clips:
            break
        clips[clip_id].append(fixed or text)
    corpus = list(clips.values())
    sources = [f"{len(corpus)} clips from the database"]
    for path in settings.ACTIVE_FLAG_MODEL_CAPTIONS:
        found = flagmodel.read_caption_csv(Path(path))
        corpus += found
        sources.append(f"{len(found)} clips from {path}")
    ontology: list[dict[str, Any]] = [
        {"name": name} for name in Label.objects.values_list("name", flat=True)
    ]
    ontology_file = Path(settings.ACTIVE_FLAG_MODEL_ONTOLOGY)
    if ontology_file.is_file():
        ontology += json.loads(ontology_file.read_text(encoding="utf-8"))
        sources.append(f"ontology {ontology_file}")
    return corpus, ontology, sources


def flag_model_build(*, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Learns the flag model (word vectors, sound sources, detector) from the captions and
    ontology above and stores it under ACTIVE_FLAG_MODEL_DIR, replacing the old one."""
    if progress:
        progress(0, 2, "reading captions")
    clips, ontology, sources = _model_corpus()
    if progress:
        progress(1, 2, f"learning from {sum(len(c) for c in clips)} captions")
    model = flagmodel.flag_model_learn(captions=clips, ontology=ontology)
    path = flag_model_path()
    model.save(path)
    _models.pop(path, None)
    return {
        "path": str(path),
        "version": flagmodel.VERSION,
        "captions": model.captions,
        "words": len(model.words),
        "sources": len(model.sources),
        "learned_from": sources,
    }


def flag_model_build_job(*, job: Job, progress: ProgressFn) -> dict[str, Any]:
    return flag_model_build(progress=progress)


def flag_model(*, build_missing: bool | None = None) -> flagmodel.FlagModel | None:
    """The current flag model, read once per process (again when the file changes); built
    first when missing (`build_missing`, by default ACTIVE_FLAG_MODEL_AUTOBUILD). None when
    there is none and too little to learn from: the flags then fall back to CIDEr-D
    consensus."""
    path = flag_model_path()
    if build_missing is None:
        build_missing = settings.ACTIVE_FLAG_MODEL_AUTOBUILD
    with _build_lock:
        if not path.is_file():
            if not build_missing:
                return None
            try:
                flag_model_build()
            except ValueError as exc:
                log.warning("no flag model, CIDEr-D consensus flags instead: %s", exc)
                return None
        mtime = path.stat().st_mtime
        cached = _models.get(path)
        if cached is None or cached[0] != mtime:
            cached = (mtime, flagmodel.FlagModel.load(path))
            _models[path] = cached
        return cached[1]


def flag_thresholds() -> scoring.FlagThresholds:
    return scoring.FlagThresholds(
        model_max_entropy=settings.ACTIVE_FLAG_MODEL_MAX_ENTROPY,
        model_min_cider=settings.ACTIVE_FLAG_MODEL_MIN_CIDER,
        consensus_min_cider=settings.ACTIVE_FLAG_CONSENSUS_MIN_CIDER,
        consensus_min_captions=settings.ACTIVE_FLAG_CONSENSUS_MIN_CAPTIONS,
        hints=settings.ACTIVE_FLAG_HINTS,
        model_defers_to_consensus=settings.ACTIVE_FLAG_MODEL_DEFERS_TO_CONSENSUS,
    )


def _live_captions(project: Project) -> QuerySet[Caption]:
    """Captions of the project that count as what people heard: submitted or approved
    crowd captions, and those imported into the project."""
    crowd = Q(
        provenance=Caption.Provenance.CROWD,
        assignment__hit__batch__project=project,
        assignment__state__in=[Assignment.State.SUBMITTED, Assignment.State.APPROVED],
    )
    imported = Q(provenance=Caption.Provenance.IMPORTED, imported_into=project)
    return Caption.objects.filter(crowd | imported)


def _texts_by_clip(captions: QuerySet[Caption]) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for pk, clip_id, text, fixed in captions.order_by("pk").values_list(
        "pk", "clip_id", "text", "fixed_text"
    ):
        out[clip_id].append((pk, fixed or text))
    return out


def captions_flag(*, captions: QuerySet[Caption], project: Project) -> dict[str, Any]:
    """Runs the disagreement checks on captions not checked yet and writes a crowd.Flag for
    each finding (reason plus evidence, which the review queue shows) and a FlagCheck for
    every caption looked at. CIDEr-D's document frequencies come from the project's
    captions (up to CORPUS_CLIPS clips), the model evidence from the promoted run."""
    todo = list(
        captions.filter(flag_check__isnull=True).select_related("assignment__hit").order_by("pk")
    )
    if not todo:
        return {"checked": 0, "flagged": 0}
    clip_ids = sorted({c.clip_id for c in todo})
    live = _live_captions(project)
    on_clips = _texts_by_clip(live.filter(clip_id__in=clip_ids))
    # the captions being checked count too, whatever their assignment's state
    for caption in todo:
        if all(pk != caption.pk for pk, _ in on_clips[caption.clip_id]):
            on_clips[caption.clip_id].append((caption.pk, caption.current_text))
    corpus_clips = list(
        live.exclude(clip_id__in=clip_ids)
        .values_list("clip_id", flat=True)
        .distinct()
        .order_by("-clip_id")[:CORPUS_CLIPS]
    )
    documents = [[t for _, t in texts] for texts in on_clips.values()]
    documents += [
        [t for _, t in texts]
        for texts in _texts_by_clip(live.filter(clip_id__in=corpus_clips)).values()
    ]
    run = promoted_run(project)
    suggestions = (
        {s.clip_id: s for s in Suggestion.objects.filter(run=run, clip_id__in=clip_ids)}
        if run
        else {}
    )
    documents += [[s.text] for s in suggestions.values()]
    cider = scoring.CiderD(documents)
    labels = clip_labels(clip_ids)
    thresholds = flag_thresholds()
    model = flag_model()
    calibration = project_calibration(project)
    flagged = 0
    with transaction.atomic():
        for caption in todo:
            suggestion = suggestions.get(caption.clip_id)
            others = [t for pk, t in on_clips[caption.clip_id] if pk != caption.pk]
            findings, score = flagmodel.caption_check(
                text=caption.current_text,
                others=others,
                suggestion=suggestion.text if suggestion else None,
                suggestion_entropy=suggestion.mean_entropy if suggestion else None,
                hints=labels.get(caption.clip_id, []),
                cider=cider,
                thresholds=thresholds,
                model=model,
                calibration=calibration,
            )
            for finding in findings:
                evidence = {"kind": finding.kind, **finding.evidence}
                if finding.kind == "model" and run is not None:
                    evidence["run"] = run.pk
                flag_create(caption=caption, reason=finding.reason, evidence=evidence)
            FlagCheck.objects.create(
                caption=caption,
                batch_id=caption.assignment.hit.batch_id if caption.assignment else None,
                kinds=[f.kind for f in findings],
                score=score,
            )
            flagged += bool(findings)
    return {"checked": len(todo), "flagged": flagged}


def assignment_flag_job(*, job: Job, progress: ProgressFn, assignment_id: int) -> dict[str, Any]:
    assignment = Assignment.objects.select_related("hit__batch__project").get(pk=assignment_id)
    progress(0, 1, "checking captions")
    return captions_flag(
        captions=Caption.objects.filter(assignment=assignment),
        project=assignment.hit.batch.project,
    )


def batch_flag_job(*, job: Job, progress: ProgressFn, batch_id: int) -> dict[str, Any]:
    batch = Batch.objects.select_related("project").get(pk=batch_id)
    progress(0, 1, "checking captions")
    return captions_flag(
        captions=Caption.objects.filter(assignment__hit__batch=batch), project=batch.project
    )


def flags_sweep() -> list[Job]:
    """Queues one batch_flag job per batch holding submitted or approved captions that no
    check has looked at yet, unless one is queued or running for that batch already.
    The periodic task runs this every ACTIVE_FLAG_SWEEP_SECONDS: one job per batch and
    minute rather than one per submit, because each check loads the promoted run's
    suggestions and builds CIDEr-D's document frequencies, which a batch shares."""
    pending = (
        Caption.objects.filter(
            flag_check__isnull=True,
            assignment__state__in=[Assignment.State.SUBMITTED, Assignment.State.APPROVED],
        )
        .values_list("assignment__hit__batch_id", flat=True)
        .distinct()
    )
    busy = {
        params.get("batch_id")
        for params in Job.objects.filter(
            kind="batch_flag", state__in=[Job.State.QUEUED, Job.State.RUNNING]
        ).values_list("params", flat=True)
    }
    jobs = []
    for batch in Batch.objects.filter(pk__in=list(pending)).select_related("project"):
        if batch.pk in busy:
            continue
        jobs.append(
            job_enqueue(
                kind="batch_flag",
                params={"batch_id": batch.pk},
                project=batch.project,
                label=f"Check new captions of {batch.name}",
            )
        )
    return jobs


def batch_flag_rate(*, batch: Batch) -> dict[str, Any]:
    """Captions checked and flagged in the batch, the rate, and how often each check fired."""
    checks = list(FlagCheck.objects.filter(batch=batch).values_list("kinds", flat=True))
    flagged = sum(1 for kinds in checks if kinds)
    by_kind: dict[str, int] = defaultdict(int)
    for kinds in checks:
        for kind in kinds:
            by_kind[kind] += 1
    return {
        "checked": len(checks),
        "flagged": flagged,
        "rate": flagged / len(checks) if checks else None,
        "by_kind": dict(sorted(by_kind.items())),
    }


def assignment_submitted(*, assignment: Assignment) -> None:
    """Receives annotation's assignment_submitted signal (connected in active.apps), which
    assignment_submit sends inside its transaction: the edit distances now; with
    ACTIVE_FLAG_ON_SUBMIT, the disagreement checks on the text queue once it commits
    (otherwise flags_sweep picks the captions up within a minute). A submit that found
    no suggestion shown (annotation.signals.SUBMIT_WRITES_IF) has no edit to record."""
    from active.models import SUGGESTIONS_SHOWN

    if vars(assignment).get("submit_writes", {}).get(SUGGESTIONS_SHOWN, True):
        caption_edits_record(assignment=assignment)
    if settings.ACTIVE_FLAG_ON_SUBMIT:
        job_enqueue(
            kind="captions_flag",
            params={"assignment_id": assignment.pk},
            project=assignment.hit.batch.project,
            label=f"Check captions of assignment #{assignment.pk}",
        )
