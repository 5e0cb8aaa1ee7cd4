"""Workflows: post-process approved captions, revert a grammar correction, rebuild the
vocabulary. The text work itself is in the pure modules (pipeline, numbers, nlp,
languagetool); this module feeds them captions and stores what they return."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce, NullIf
from django.utils import timezone

from annotation.models import Assignment, Caption
from core.models import Job, Project, Role
from core.progress import ProgressFn, no_progress
from core.services import Progress, require_role
from postprocessing import languagetool
from postprocessing.languagetool import Correction, LanguageToolUnavailable
from postprocessing.models import ProcessedCaption, StepStatus, VocabularyEntry
from postprocessing.pipeline import (
    REVERTED_REASON,
    Grammar,
    pipeline_version,
    process_many,
    refinish,
)

log = logging.getLogger(__name__)

CHUNK = 500  # captions per transaction; LanguageTool gets them in requests of ~20 KB


# Which captions -------------------------------------------------------------------------


def approved_captions() -> QuerySet[Caption]:
    """Captions that belong in the dataset: approved crowd captions and imported ones no
    reviewer has still to approve."""
    return Caption.objects.filter(
        Q(provenance=Caption.Provenance.IMPORTED, pending_review=False)
        | Q(assignment__state=Assignment.State.APPROVED)
    )


def project_captions(project: Project) -> QuerySet[Caption]:
    """Every caption of the project, approved or not: written in its batches, or imported
    into it (never another project's imports, even on a clip both projects hold)."""
    return Caption.objects.filter(
        Q(assignment__hit__batch__project=project)
        | Q(provenance=Caption.Provenance.IMPORTED, imported_into=project)
    )


def captions_pending(
    *, project: Project | None = None, everything: bool = False, retry_grammar: bool = False
) -> QuerySet[Caption]:
    """Approved captions to (re)process: never processed, processed by another pipeline
    version, or whose text changed since (a reviewer's fix). `everything`: all approved
    captions. `retry_grammar`: also those whose grammar step was skipped for want of a
    LanguageTool (not those a reviewer reverted)."""
    captions = approved_captions()
    if project is not None:
        captions = captions.filter(pk__in=project_captions(project).values("pk"))
    if everything:
        return captions.order_by("pk")
    current = Coalesce(NullIf(F("fixed_text"), Value("")), F("text"))
    stale = (
        Q(processed__isnull=True)
        | ~Q(processed__pipeline_version=pipeline_version())
        | ~Q(processed__source_text=current)
    )
    if retry_grammar:
        stale |= Q(processed__grammar_status=StepStatus.SKIPPED, processed__grammar_reverted=False)
    return captions.filter(stale).order_by("pk")


def caption_projects(caption_ids: Iterable[int]) -> set[int]:
    """Ids of the projects these captions belong to (their batches', or the one they
    were imported into)."""
    ids = list(caption_ids)
    via_batches = Caption.objects.filter(pk__in=ids, assignment__isnull=False).values_list(
        "assignment__hit__batch__project_id", flat=True
    )
    imported = Caption.objects.filter(
        pk__in=ids, provenance=Caption.Provenance.IMPORTED
    ).values_list("imported_into_id", flat=True)
    return set(via_batches) | {pk for pk in imported if pk is not None}


# LanguageTool ---------------------------------------------------------------------------


def grammar_config() -> languagetool.Config:
    return languagetool.Config(
        url=settings.LANGUAGETOOL_URL,
        jar_dir=settings.LTP_JAR_DIR_PATH,
        download=settings.LANGUAGETOOL_DOWNLOAD,
        language=settings.LANGUAGETOOL_LANGUAGE,
        disabled_rules=tuple(settings.LANGUAGETOOL_DISABLED_RULES),
        max_chars=settings.LANGUAGETOOL_BATCH_CHARS,
    )


class _Grammar:
    """The LanguageTool client for one run. After the server fails once, the rest of the
    run is skipped with the same reason instead of waiting on it chunk after chunk."""

    def __init__(self, config: languagetool.Config) -> None:
        self.config = config
        self.client: languagetool.LanguageToolClient | None = None
        self.failure = ""

    def correct_many(self, texts: Sequence[str]) -> list[Correction]:
        if self.failure:
            raise LanguageToolUnavailable(self.failure)
        try:
            if self.client is None:
                self.client = languagetool.client_for(self.config)
            return self.client.correct_many(texts)
        except LanguageToolUnavailable as exc:
            self.failure = str(exc)
            log.warning("grammar correction skipped: %s", exc)
            raise


# Post-processing ------------------------------------------------------------------------


def captions_postprocess(
    *,
    caption_ids: Sequence[int],
    progress: ProgressFn = no_progress,
    grammar: Grammar | None = None,
) -> dict[str, Any]:
    """Runs the pipeline over these captions (approved or not: the caller chooses) and
    stores a ProcessedCaption for each, CHUNK captions per transaction. A caption a
    reviewer reverted stays without grammar correction. Returns counts and, when grammar
    correction was skipped, why."""
    grammar = grammar or _Grammar(grammar_config())
    version = pipeline_version()
    counts: Counter[str] = Counter()
    total = len(caption_ids)
    for start in range(0, total, CHUNK):
        chunk = caption_ids[start : start + CHUNK]
        with transaction.atomic():
            captions = list(
                Caption.objects.filter(pk__in=chunk).select_related("processed").order_by("pk")
            )
            reverted = [
                bool(getattr(c, "processed", None)) and c.processed.grammar_reverted
                for c in captions
            ]
            results = process_many(
                [c.current_text for c in captions], grammar=grammar, grammar_off=reverted
            )
            now = timezone.now()
            rows = []
            for caption, result in zip(captions, results, strict=True):
                status = result.grammar["status"]
                counts[status] += 1
                rows.append(
                    ProcessedCaption(
                        caption=caption,
                        source_text=caption.current_text,
                        final_text=result.final_text,
                        train_text=result.train_text,
                        tokens=result.tokens,
                        steps=result.steps,
                        grammar_status=status,
                        pipeline_version=version,
                        processed_at=now,
                    )
                )
            ProcessedCaption.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["caption"],
                update_fields=[
                    "source_text",
                    "final_text",
                    "train_text",
                    "tokens",
                    "steps",
                    "grammar_status",
                    "pipeline_version",
                    "processed_at",
                ],
            )
        counts["processed"] += len(captions)
        progress(start + len(chunk), total, "captions post-processed")
    failure = getattr(grammar, "failure", "")
    return {
        "processed": counts["processed"],
        "grammar_applied": counts[StepStatus.APPLIED],
        "grammar_unchanged": counts[StepStatus.UNCHANGED],
        "grammar_skipped": counts[StepStatus.SKIPPED],
        "grammar_skip_reason": failure,
        "pipeline_version": version,
    }


def captions_postprocess_later(*, caption_ids: Sequence[int]) -> None:
    """Queues these captions for post-processing on the text queue once the surrounding
    transaction commits. A broker failure is logged, not raised: the approval stands, and
    `postprocess_captions` picks the captions up later."""
    ids = [int(pk) for pk in caption_ids]
    if not ids:
        return

    def send() -> None:
        from postprocessing.tasks import captions_postprocess as task

        task.apply_async(args=(ids,), queue="text")

    transaction.on_commit(send, robust=True)


def assignment_postprocess_later(*, assignment: Assignment) -> None:
    """On approval: post-process the assignment's captions in the background."""
    captions_postprocess_later(
        caption_ids=list(Caption.objects.filter(assignment=assignment).values_list("pk", flat=True))
    )


def captions_postprocess_job(
    *,
    job: Job,
    progress: Progress,
    project_id: int | None = None,
    everything: bool = False,
    limit: int | None = None,
) -> dict[str, Any]:
    """The `captions_postprocess` job: pending approved captions (all with `everything`,
    at most `limit`), then the vocabulary of every project they belong to."""
    project = Project.objects.get(pk=project_id) if project_id is not None else None
    grammar = _Grammar(grammar_config())
    available, _ = languagetool.describe(grammar.config)
    pending = captions_pending(project=project, everything=everything, retry_grammar=available)
    ids = list(pending.values_list("pk", flat=True))
    if limit:
        ids = ids[:limit]
    progress.log(f"{len(ids)} caption(s) to post-process (pipeline {pipeline_version()})")
    result = captions_postprocess(caption_ids=ids, progress=progress, grammar=grammar)
    if result["grammar_skip_reason"]:
        progress.log(f"grammar correction skipped: {result['grammar_skip_reason']}")
    projects = [project.pk] if project is not None else sorted(caption_projects(ids))
    vocabulary = {}
    for pk in projects:
        built = vocabulary_rebuild(project=Project.objects.get(pk=pk))
        vocabulary[str(pk)] = built["tokens"]
    return {**result, "vocabulary_sizes": vocabulary}


def caption_for_project(*, project: Project, caption_id: int) -> Caption:
    """The caption if it belongs to the project, else Caption.DoesNotExist."""
    return project_captions(project).select_related("processed", "clip").get(pk=caption_id)


def processed_grammar_revert(
    *, processed: ProcessedCaption, project: Project, user: User
) -> ProcessedCaption:
    """Undoes LanguageTool's correction of one caption: the final text goes back to the
    text before the grammar step, tokens and training text follow, and re-processing
    keeps grammar correction off for this caption. Reviewers and researchers only."""
    require_role(project, user, Role.RESEARCHER, Role.REVIEWER)
    if not project_captions(project).filter(pk=processed.caption_id).exists():
        raise PermissionDenied("This caption is not part of the project.")
    with transaction.atomic():
        processed = ProcessedCaption.objects.select_for_update().get(pk=processed.pk)
        step = processed.grammar_step
        if not processed.can_revert_grammar or step is None:
            state = "already reverted" if processed.grammar_reverted else processed.grammar_status
            raise ValidationError(
                f"Nothing to revert: the grammar step of this caption is {state}."
            )
        now = timezone.now()
        tokens, train, finish = refinish(step["before"])
        reverted_step = {
            **step,
            "after": step["before"],
            "status": StepStatus.SKIPPED.value,
            "reason": REVERTED_REASON,
            "reverted": {
                "by": user.get_username(),
                "at": now.isoformat(),
                "correction": step["after"],
            },
        }
        redone = ("grammar", "tokenise", "train_text")
        early = [s for s in processed.steps if s["name"] not in redone]
        processed.steps = [*early, reverted_step, *finish]
        processed.final_text = step["before"]
        processed.tokens = tokens
        processed.train_text = train
        processed.grammar_status = StepStatus.SKIPPED
        processed.grammar_reverted = True
        processed.grammar_reverted_by = user
        processed.grammar_reverted_at = now
        processed.full_clean(exclude=["caption"])
        processed.save()
    return processed


# Vocabulary -----------------------------------------------------------------------------


def vocabulary_rebuild(*, project: Project) -> dict[str, int]:
    """Replaces the project's vocabulary with the token counts of the training text of
    its approved, processed captions. Approved captions not processed yet are counted
    (`unprocessed`) but contribute nothing: run postprocess_captions first."""
    captions = approved_captions().filter(pk__in=project_captions(project).values("pk"))
    counts: Counter[str] = Counter()
    processed = too_long = 0
    texts = captions.filter(processed__isnull=False).values_list("processed__train_text", flat=True)
    for text in texts.iterator(chunk_size=5000):
        processed += 1
        counts.update(text.split())
    max_length = VocabularyEntry._meta.get_field("token").max_length or 200
    for token in [t for t in counts if len(t) > max_length]:
        too_long += 1
        del counts[token]
    with transaction.atomic():
        VocabularyEntry.objects.filter(project=project).delete()
        VocabularyEntry.objects.bulk_create(
            (VocabularyEntry(project=project, token=t, count=n) for t, n in counts.items()),
            batch_size=2000,
        )
    return {
        "captions": processed,
        "unprocessed": captions.filter(processed__isnull=True).count(),
        "tokens": len(counts),
        "token_occurrences": sum(counts.values()),
        "left_out_too_long": too_long,
    }


def vocabulary_rebuild_job(*, job: Job, progress: Progress, project_id: int) -> dict[str, int]:
    return vocabulary_rebuild(project=Project.objects.get(pk=project_id))
