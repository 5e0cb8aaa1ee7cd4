"""Pre-suggestions: in an edit-mode batch a caption box starts from the promoted run's
suggestion (fixed at first sight), and each submitted caption's edit distance to it is
recorded; reviewers see the suggestions too. After a promotion the new run suggests
captions for the whole project, and only then becomes the suggesting model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from active import scoring
from active.models import BatchConfig, CaptionEdit, Presuggest, Presuggestion
from active.services.ranking import batches_rank, promoted_run
from annotation.models import Assignment, Batch, Caption, HitClip
from core.models import Job, Project
from core.progress import ProgressFn, no_progress
from curation.models import Clip
from modeling.models import Suggestion, TrainingRun


def presuggested_texts(*, assignment: Assignment) -> dict[int, str]:
    """Texts the caption boxes start from: in an edit-mode batch, the promoted run's
    suggestion for each clip, fixed at first sight (Presuggestion). A blind batch reads no
    suggestion at all, so nothing of the model can reach the page."""
    batch = assignment.hit.batch
    config = BatchConfig.objects.filter(batch=batch).first()
    if config is None or config.presuggest != Presuggest.EDIT:
        return {}
    shown = {p.clip_id: p.text for p in Presuggestion.objects.filter(assignment=assignment)}
    if assignment.state != Assignment.State.ACCEPTED:
        return shown
    clip_ids = list(HitClip.objects.filter(hit=assignment.hit_id).values_list("clip_id", flat=True))
    missing = [c for c in clip_ids if c not in shown]
    run = promoted_run(batch.project)
    if missing and run is not None:
        for suggestion in Suggestion.objects.filter(run=run, clip_id__in=missing):
            made, _ = Presuggestion.objects.get_or_create(
                assignment=assignment,
                clip_id=suggestion.clip_id,
                defaults={"suggestion": suggestion, "text": suggestion.text},
            )
            shown[made.clip_id] = made.text
    return shown


def caption_edits_record(*, assignment: Assignment) -> list[CaptionEdit]:
    """Stores, for each caption that started from a suggestion, its edit distance to it."""
    shown = {p.clip_id: p.text for p in Presuggestion.objects.filter(assignment=assignment)}
    if not shown:
        return []
    edits = []
    for caption in Caption.objects.filter(assignment=assignment, clip_id__in=list(shown)):
        suggested = shown[caption.clip_id]
        edits.append(
            CaptionEdit(
                caption=caption,
                suggested_text=suggested,
                char_distance=scoring.edit_distance(suggested, caption.text),
                word_distance=scoring.edit_distance(
                    scoring.tokens(suggested), scoring.tokens(caption.text)
                ),
            )
        )
    return CaptionEdit.objects.bulk_create(edits, ignore_conflicts=True)


def edit_stats(*, batch: Batch) -> dict[str, Any]:
    edits = CaptionEdit.objects.filter(caption__assignment__hit__batch=batch)
    n = edits.count()
    if not n:
        return {"captions": 0}
    rows = list(edits.values_list("word_distance", "char_distance"))
    return {
        "captions": n,
        "unchanged": sum(1 for w, c in rows if c == 0),
        "mean_word_distance": sum(w for w, _ in rows) / n,
        "mean_char_distance": sum(c for _, c in rows) / n,
    }


def suggestions_for_review(clip_ids: Iterable[int], project: Project) -> dict[int, Suggestion]:
    """The promoted run's suggestion per clip, for reviewers (one query), left out where
    its confidence is below settings.SUGGESTION_MIN_CONFIDENCE."""
    run = promoted_run(project)
    if run is None:
        return {}
    confident = Suggestion.objects.filter(
        Suggestion.at_least(settings.SUGGESTION_MIN_CONFIDENCE),
        run=run,
        clip_id__in=list(clip_ids),
    )
    return {s.clip_id: s for s in confident}


def clips_to_suggest(*, run: TrainingRun) -> QuerySet[Clip]:
    """The project's ready clips with audio that the run has no suggestion for."""
    from modeling.services import clips_unsuggested

    return clips_unsuggested(run=run)


def project_suggest(
    *,
    run: TrainingRun,
    beam_size: int = 3,
    promote: bool = False,
    progress: ProgressFn = no_progress,
) -> dict[str, Any]:
    """After a promotion decision: the run suggests captions for the ready clips of the
    project it has none for yet (captioned or not, so suggestions can be compared with
    people's); with `promote` it then becomes the suggesting model, unless a later
    decision chose another run meanwhile; and the open batches are re-ranked."""
    from modeling.services import run_promotion_finish
    from modeling.suggestions import clips_caption

    clip_ids = list(clips_to_suggest(run=run).values_list("pk", flat=True))
    result: dict[str, Any] = {"run": run.pk, "clips": 0, "suggestions": 0}
    if clip_ids:
        result = clips_caption(run=run, clip_ids=clip_ids, beam_size=beam_size, progress=progress)
    if promote:
        result["promoted"] = run_promotion_finish(run=run)
    result["batches_ranked"] = batches_rank(project=run.project)
    return result


def project_suggest_job(
    *, job: Job, progress: ProgressFn, run_id: int, beam_size: int = 3, promote: bool = False
) -> dict[str, Any]:
    run = TrainingRun.objects.select_related("project").get(pk=run_id)
    return project_suggest(run=run, beam_size=beam_size, promote=promote, progress=progress)
