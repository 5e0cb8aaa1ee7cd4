"""Corpus API (mounted on /api/ by earmark.api): export snapshots — list, create, status,
download — and corpus statistics.

Snapshots are the researchers' (as on the pages); statistics are readable by researchers
and reviewers and recomputed by researchers. A project you are not in is a 404, a missing
role a 403.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from ninja import Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status

from core.access import project_for_api, signed_in_user
from core.media import media_response
from core.models import Role
from core.schemas import ErrorOut, JobOut
from core.services import job_enqueue
from corpus import services
from corpus.models import CorpusStatistics, Snapshot
from curation.models import Split

router = Router(tags=["corpus"])

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)


class SnapshotIn(Schema):
    format: str
    text: str = "raw"
    splits: list[str] = list(Split.values)
    # pack the clips' audio too (Clotho or Hugging Face audiofolder layout, a dataset card)
    with_audio: bool = False
    licence: str = Snapshot.Licence.CC_BY_4.value


class FileOut(Schema):
    path: str
    split: str
    bytes: int
    sha256: str
    captions: int
    clips: int


class ExtraFileOut(Schema):
    path: str
    bytes: int
    sha256: str


class SnapshotOut(Schema):
    version: int
    format: str
    text: str
    splits: list[str]
    with_audio: bool
    licence: str
    state: str
    counts: dict[str, dict[str, int]]
    error: str
    archive_sha256: str
    created_at: datetime
    finished_at: datetime | None
    job: JobOut | None
    files: list[FileOut]
    # an audio snapshot's card, metadata files and missing_audio.csv
    extra_files: list[ExtraFileOut]
    missing_audio: int  # clips left out for want of readable audio
    download_url: str | None


class SnapshotDetailOut(SnapshotOut):
    manifest: dict[str, Any]


class StatisticsIn(Schema):
    snapshot: int | None = None  # a snapshot version; none: the project's corpus now


class StatisticsOut(Schema):
    id: int
    snapshot: int | None
    computed_at: datetime
    data: dict[str, Any]
    length_chart_url: str
    label_chart_url: str


def _snapshot(request: HttpRequest, slug: str, version: int) -> Snapshot:
    project = project_for_api(request, slug, *WRITE)
    found = Snapshot.objects.select_related("project", "job").filter(
        project=project, version=version
    )
    snapshot = found.first()
    if snapshot is None:
        raise HttpError(404, f"No snapshot v{version} in project {slug!r}.")
    return snapshot


def _snapshot_out(snapshot: Snapshot, *, manifest: bool = False) -> dict[str, Any]:
    ready = snapshot.state == Snapshot.State.READY
    url = reverse("api-1:snapshot_download", args=[snapshot.project.slug, snapshot.version])
    out = {
        "version": snapshot.version,
        "format": snapshot.format,
        "text": snapshot.text,
        "splits": snapshot.splits,
        "with_audio": snapshot.with_audio,
        "licence": snapshot.licence,
        "state": snapshot.state,
        "counts": snapshot.counts,
        "error": snapshot.error,
        "archive_sha256": snapshot.archive_sha256,
        "created_at": snapshot.created_at,
        "finished_at": snapshot.finished_at,
        "job": snapshot.job,
        "files": snapshot.files,
        "extra_files": snapshot.manifest.get("extra_files", []),
        "missing_audio": snapshot.missing_audio,
        "download_url": url if ready else None,
    }
    if manifest:
        out["manifest"] = snapshot.manifest
    return out


@router.get(
    "/projects/{slug}/snapshots",
    response={200: list[SnapshotOut], 403: ErrorOut, 404: ErrorOut},
)
def snapshot_list(request: HttpRequest, slug: str) -> Any:
    project = project_for_api(request, slug, *WRITE)
    return [_snapshot_out(s) for s in project.snapshots.select_related("project", "job")]


@router.post(
    "/projects/{slug}/snapshots",
    response={202: SnapshotOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
)
def snapshot_create(request: HttpRequest, slug: str, payload: SnapshotIn) -> Any:
    """Numbers a new snapshot and builds it in the background; follow `job` or poll the
    snapshot until its state is ready, then download it."""
    project = project_for_api(request, slug, *WRITE)
    try:
        snapshot = services.snapshot_start(
            project=project,
            fmt=payload.format,
            text=payload.text,
            splits=payload.splits,
            with_audio=payload.with_audio,
            licence=payload.licence,
            created_by=signed_in_user(request),
        )
    except ValidationError as exc:
        return Status(400, {"detail": "; ".join(exc.messages)})
    return Status(202, _snapshot_out(snapshot))


@router.get(
    "/projects/{slug}/snapshots/{version}",
    response={200: SnapshotDetailOut, 403: ErrorOut, 404: ErrorOut},
)
def snapshot_get(request: HttpRequest, slug: str, version: int) -> Any:
    return _snapshot_out(_snapshot(request, slug, version), manifest=True)


@router.get(
    "/projects/{slug}/snapshots/{version}/download",
    response={403: ErrorOut, 404: ErrorOut, 409: ErrorOut},
    url_name="snapshot_download",
)
def snapshot_download(
    request: HttpRequest, slug: str, version: int, file: str | None = None
) -> Any:
    """The snapshot's zip archive, or with `file` one of its files (names in `files` and
    `extra_files`, manifest.json and, with audio, SHA256SUMS)."""
    snapshot = _snapshot(request, slug, version)
    if snapshot.state != Snapshot.State.READY:
        return Status(409, {"detail": f"Snapshot v{version} is {snapshot.state}."})
    response: HttpResponseBase  # the whole archive or one file, streamed either way
    if file is None:
        response = media_response(request, snapshot.archive, missing="The archive is missing.")
        name = snapshot.archive.name.rsplit("/", 1)[-1]
    else:
        try:
            chunks = services.snapshot_file_chunks(snapshot=snapshot, path=file)
        except ValidationError as exc:
            return Status(404, {"detail": "; ".join(exc.messages)})
        response = StreamingHttpResponse(chunks, content_type="application/octet-stream")
        name = file
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _statistics_out(record: CorpusStatistics) -> dict[str, Any]:
    slug = record.project.slug
    return {
        "id": record.pk,
        "snapshot": record.snapshot.version if record.snapshot else None,
        "computed_at": record.computed_at,
        "data": record.data,
        "length_chart_url": reverse("corpus_statistics_chart", args=[slug, record.pk, "lengths"]),
        "label_chart_url": reverse("corpus_statistics_chart", args=[slug, record.pk, "labels"]),
    }


@router.get(
    "/projects/{slug}/statistics",
    response={200: StatisticsOut, 403: ErrorOut, 404: ErrorOut},
)
def statistics_get(request: HttpRequest, slug: str, snapshot: int | None = None) -> Any:
    """The latest statistics of the project's corpus, or of one snapshot (researchers)."""
    if snapshot is None:
        project = project_for_api(request, slug, *READ)
        found = CorpusStatistics.objects.filter(project=project, snapshot=None)
    else:
        found = CorpusStatistics.objects.filter(snapshot=_snapshot(request, slug, snapshot))
    record = found.select_related("project", "snapshot").first()
    if record is None:
        raise HttpError(404, "No statistics computed yet; POST to this address to compute them.")
    return _statistics_out(record)


@router.post(
    "/projects/{slug}/statistics",
    response={202: JobOut, 403: ErrorOut, 404: ErrorOut},
)
def statistics_compute(request: HttpRequest, slug: str, payload: StatisticsIn) -> Any:
    """Computes statistics (with parts of speech when a spaCy pipeline is available) as a
    job; its result names the statistics id."""
    project = project_for_api(request, slug, *WRITE)
    params: dict[str, int] = {"project_id": project.pk}
    if payload.snapshot is not None:
        params["snapshot_id"] = _snapshot(request, slug, payload.snapshot).pk
    job = job_enqueue(
        kind="corpus_statistics",
        params=params,
        project=project,
        created_by=signed_in_user(request),
        label=f"Statistics of {project.slug}"
        + (f" v{payload.snapshot}" if payload.snapshot else ""),
    )
    return Status(202, job)
