"""Corpus statistics: counts, lengths and labels of the live corpus or of a snapshot, with
parts of speech and the ARS and SCR analytics when their inputs exist, and the charts
drawn from them."""

from __future__ import annotations

import json
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile

from core.models import Job, Project
from core.progress import ProgressFn, no_progress
from corpus import queries, stats
from corpus.models import CorpusStatistics, Snapshot
from corpus.services.rows import export_reads, split_rows
from curation.models import Clip, Label, Split


def _clip_labels(project: Project, splits: list[str]) -> dict[int, list[str]]:
    """clip id -> AudioSet label mids (sorted) of the clips of the splits' approved captions."""
    labels: dict[int, list[str]] = defaultdict(list)
    for split in splits:
        clip_ids = queries.approved_captions(project, split).order_by().values("clip_id")
        links = Clip.labels.through.objects.filter(clip_id__in=clip_ids).order_by()
        for clip_id, mid in links.values_list("clip_id", "label__mid").iterator(10_000):
            labels[clip_id].append(mid)
    return {clip_id: sorted(set(mids)) for clip_id, mids in labels.items()}


def _label_names(mids: set[str]) -> dict[str, str]:
    return dict(Label.objects.filter(mid__in=mids).values_list("mid", "name"))


def statistics_data(
    tally: stats.Tally, *, project: Project, splits: list[str], text: str
) -> dict[str, Any]:
    """The counted captions of `tally` summed up with the AudioSet labels of their clips:
    the numbers a CorpusStatistics row and a snapshot's manifest store."""
    with export_reads():
        clip_labels = _clip_labels(project, splits)
    names = _label_names({m for mids in clip_labels.values() for m in mids})
    return {"text": text, **tally.summary(clip_labels=clip_labels, label_names=names)}


def _pos_pipeline() -> tuple[Any | None, str]:
    """(spaCy pipeline, "") or (None, why not)."""
    try:
        from postprocessing.nlp import pos_pipeline
    except ImportError:
        return None, "needs a spaCy pipeline (post-processing's NLP module is not installed)"
    try:
        nlp = pos_pipeline()
    except Exception as exc:  # spaCy raises OSError for a missing package, others its own
        return None, f"needs a spaCy pipeline: {exc}"
    if nlp is None:
        return None, "needs a spaCy pipeline (none is configured)"
    return nlp, ""


def _pipeline_name(nlp: Any) -> str:
    meta = getattr(nlp, "meta", {}) or {}
    return f"{meta.get('lang', '?')}_{meta.get('name', '?')}-{meta.get('version', '?')}"


def _with_pos(data: dict[str, Any], texts: Callable[[], Iterator[str]]) -> dict[str, Any]:
    nlp, reason = _pos_pipeline()
    if nlp is None:
        return {**data, "pos": None, "pos_unavailable": reason}
    return {**data, "pos": {"pipeline": _pipeline_name(nlp), **stats.pos_counts(texts(), nlp)}}


def statistics_compute(
    *,
    project: Project,
    snapshot: Snapshot | None = None,
    with_pos: bool = True,
    job: Job | None = None,
    progress: ProgressFn = no_progress,
) -> CorpusStatistics:
    """Computes and stores the statistics of the project's corpus now, or of a snapshot
    (read back from its archive, so they describe exactly what was exported), with the
    parts of speech when a spaCy pipeline is available; the charts are drawn when first
    shown (statistics_chart)."""
    if snapshot is not None and snapshot.state != Snapshot.State.READY:
        raise ValidationError(f"Snapshot v{snapshot.version} is {snapshot.state}, not ready.")
    progress(0, 3, "counting")
    if snapshot is None:
        tally = stats.Tally()
        for split in Split.values:
            with export_reads():
                for row in split_rows(project, split):
                    tally.add(split=split, clip_id=row.clip_id, text=row.raw)
        data = statistics_data(
            tally, project=project, splits=list(Split.values), text=Snapshot.Text.RAW
        )

        def texts() -> Iterator[str]:
            for split in Split.values:
                with export_reads():
                    yield from (row.raw for row in split_rows(project, split))
    else:
        earlier = snapshot.statistics.order_by("computed_at").first()
        data = dict(earlier.data) if earlier else {}

        def texts() -> Iterator[str]:
            yield from _snapshot_texts(snapshot)

    progress(1, 3, "parts of speech" if with_pos else "storing")
    if with_pos:
        data = _with_pos(data, texts)
    else:
        data = {**data, "pos": None, "pos_unavailable": "not computed (asked without POS)"}
    data = _with_analytics(data, texts, _clip_texts(project, snapshot))
    progress(2, 3, "storing")
    record = CorpusStatistics(project=project, snapshot=snapshot, data=data, job=job)
    record.save()
    progress(3, 3, "done")
    return record


def _clip_texts(project: Project, snapshot: Snapshot | None) -> Callable[[], Iterator[Any]]:
    """(clip id, caption) pairs of the live corpus or of a JSON-lines snapshot (the other
    formats carry no clip ids: nothing)."""

    def pairs() -> Iterator[tuple[int, str]]:
        if snapshot is None:
            for split in Split.values:
                with export_reads():
                    yield from ((row.clip_id, row.raw) for row in split_rows(project, split))
        elif snapshot.format == Snapshot.Format.JSONL:
            with zipfile.ZipFile(snapshot.archive.open("rb")) as archive:
                for entry in snapshot.files:
                    with archive.open(str(entry["path"])) as raw:
                        for line in raw:
                            record = json.loads(line)
                            yield int(record["clip_id"]), str(record["text"])

    return pairs


def _with_analytics(
    data: dict[str, Any],
    texts: Callable[[], Iterator[str]],
    clip_texts: Callable[[], Iterator[Any]],
) -> dict[str, Any]:
    """ARS (with an image-caption word-frequency table, ARS_IMAGE_WORD_FREQUENCIES) and SCR
    (with speech transcripts, SCR_TRANSCRIPTS), each only when its input exists; otherwise
    the reason is kept for the page."""
    from django.conf import settings

    from corpus import analytics

    table = getattr(settings, "ARS_IMAGE_WORD_FREQUENCIES", "")
    if not table:
        data = {**data, "ars": None, "ars_unavailable": "no image-caption word-frequency table"}
    else:
        nlp, reason = _pos_pipeline()
        if nlp is None:
            data = {**data, "ars": None, "ars_unavailable": reason}
        else:
            try:
                image = analytics.lemmatise_table(analytics.read_word_frequencies(table), nlp)
            except analytics.AnalyticsInputError as exc:
                data = {**data, "ars": None, "ars_unavailable": str(exc)}
            else:
                captions = analytics.content_lemmas(texts(), nlp)
                ars = analytics.audio_relevance(captions, image)
                data = {**data, "ars": {**ars, "table": Path(table).name}}
    source = getattr(settings, "SCR_TRANSCRIPTS", "")
    if not source:
        return {**data, "scr": None, "scr_unavailable": "no speech transcripts"}
    try:
        transcripts = _transcripts_by_clip(Path(source))
    except ValidationError as exc:
        return {**data, "scr": None, "scr_unavailable": "; ".join(exc.messages)}
    scr = analytics.corpus_speech_coverage(clip_texts(), transcripts)
    if not scr["captions"]:
        return {**data, "scr": None, "scr_unavailable": "no caption's clip has a transcript"}
    return {**data, "scr": {**scr, "transcripts": Path(source).name}}


def _transcripts_by_clip(path: Path) -> dict[int, str]:
    """A JSON object {clip key: transcript}; a key is a clip's id, YouTube id or original
    file name."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{path.name}: cannot read the transcripts ({exc})") from None
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise ValidationError(f"{path.name}: expected a JSON object of clip -> transcript text")
    out: dict[int, str] = {}
    ids = {int(k) for k in raw if k.isdigit()}
    for pk in Clip.objects.filter(pk__in=ids).values_list("pk", flat=True):
        out[pk] = raw[str(pk)]
    names = [k for k in raw if not k.isdigit()]
    for pk, youtube_id in Clip.objects.filter(youtube_id__in=names).values_list("pk", "youtube_id"):
        out.setdefault(pk, raw[youtube_id])
    for pk, name in Clip.objects.filter(original_name__in=names).values_list("pk", "original_name"):
        out.setdefault(pk, raw[name])
    return out


def _snapshot_texts(snapshot: Snapshot) -> Iterator[str]:
    """Every caption text of a snapshot, read from its archive."""
    import csv
    import io

    with zipfile.ZipFile(snapshot.archive.open("rb")) as archive:
        for entry in snapshot.files:
            with archive.open(str(entry["path"])) as raw:
                lines = io.TextIOWrapper(raw, encoding="utf-8", newline="")
                if snapshot.format == Snapshot.Format.JSONL:
                    for line in lines:
                        yield json.loads(line)["text"]
                    continue
                reader = csv.reader(lines)
                next(reader, None)
                for row in reader:
                    if snapshot.format == Snapshot.Format.AUDIOCAPS:
                        yield row[3]
                    else:
                        yield from (cell for cell in row[1:] if cell)


def statistics_compute_job(
    *, job: Job, progress: ProgressFn, project_id: int, snapshot_id: int | None = None
) -> dict[str, Any]:
    project = Project.objects.get(pk=project_id)
    snapshot = Snapshot.objects.get(pk=snapshot_id, project=project) if snapshot_id else None
    record = statistics_compute(project=project, snapshot=snapshot, job=job, progress=progress)
    every = record.data.get("all", {})
    pos = record.data.get("pos") or {}
    return {
        "statistics": record.pk,
        "captions": every.get("captions", 0),
        "vocabulary": every.get("vocabulary", 0),
        "nouns": pos.get("nouns"),
        "pos_unavailable": record.data.get("pos_unavailable", ""),
        "ars": (record.data.get("ars") or {}).get("mean"),
        "scr": (record.data.get("scr") or {}).get("mean"),
    }


CHARTS = {
    "lengths": ("length_chart", stats.length_chart),
    "labels": ("label_chart", stats.label_chart),
}


def statistics_chart(*, record: CorpusStatistics, kind: str) -> Any:
    """The record's chart ("lengths" or "labels") as a stored file, drawn on first use
    (snapshot builds store the numbers only, to stay fast)."""
    if kind not in CHARTS:
        raise ValidationError(f"Unknown chart {kind!r}; use one of {', '.join(CHARTS)}.")
    field, draw = CHARTS[kind]
    stored = getattr(record, field)
    if not stored:
        project = record.project
        title = f"{project.slug} v{record.snapshot.version}" if record.snapshot else project.slug
        stem = f"{project.slug}-{record.pk}-{kind}"
        stored.save(f"{stem}.png", ContentFile(draw(record.data, title=title)), save=False)
        record.save(update_fields=[field])
    return stored
