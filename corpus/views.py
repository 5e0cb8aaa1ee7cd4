"""Corpus pages: export snapshots (researchers) and corpus statistics (researchers and
reviewers). Objects load through the project (core.access.project_for_page: 404 for
non-members, 403 for a missing role), so a version or id of another project is a 404."""

from __future__ import annotations

from pathlib import PurePosixPath

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.access import project_for_page, signed_in_user
from core.flash import job_queued
from core.media import media_response
from core.models import Role
from core.services import job_enqueue
from corpus import services
from corpus.forms import SnapshotForm
from corpus.models import CorpusStatistics, Snapshot

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)
# a snapshot's files served one by one (SHA256SUMS has no suffix: text/plain)
_FILE_TYPES = {
    ".csv": "text/csv",
    ".json": "application/json",
    ".jsonl": "application/json",
    ".md": "text/markdown",
}


def _snapshot_for(request: HttpRequest, slug: str, version: int) -> Snapshot:
    project, _ = project_for_page(request, slug, *WRITE)
    return get_object_or_404(
        Snapshot.objects.select_related("project", "job"), project=project, version=version
    )


def _snapshot_list_page(request: HttpRequest, slug: str, form: SnapshotForm) -> HttpResponse:
    project, role = project_for_page(request, slug, *WRITE)
    snapshots = project.snapshots.select_related("job", "created_by")
    context = {"project": project, "role": role, "snapshots": snapshots, "form": form}
    return render(request, "corpus/snapshot_list.html", context)


@login_required
@require_GET
def snapshot_list(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    return _snapshot_list_page(request, slug, SnapshotForm(project=project))


@login_required
@require_POST
def snapshot_new(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    form = SnapshotForm(request.POST, project=project)
    if form.is_valid():
        try:
            snapshot = services.snapshot_start(
                project=project,
                fmt=form.cleaned_data["format"],
                text=form.cleaned_data["text"],
                splits=form.cleaned_data["splits"],
                with_audio=form.cleaned_data["with_audio"],
                licence=form.cleaned_data["licence"],
                created_by=signed_in_user(request),
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            if snapshot.job is not None:
                text = f"Building snapshot v{snapshot.version} as {{job}}."
                job_queued(request, job=snapshot.job, text=text)
            return redirect(snapshot)
    return _snapshot_list_page(request, slug, form)


@login_required
@require_GET
def snapshot_detail(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    snapshot = _snapshot_for(request, slug, version)
    context = {
        "project": snapshot.project,
        "role": Role.RESEARCHER,
        "snapshot": snapshot,
        "job": snapshot.job,
        "files": snapshot.files,
        "statistics": snapshot.statistics.first(),
    }
    return render(request, "corpus/snapshot_detail.html", context)


@login_required
@require_GET
def snapshot_download(request: HttpRequest, slug: str, version: int) -> HttpResponseBase:
    snapshot = _snapshot_for(request, slug, version)
    if snapshot.state != Snapshot.State.READY:
        raise Http404(f"Snapshot v{snapshot.version} is {snapshot.state}; nothing to download.")
    response = media_response(request, snapshot.archive, missing="The archive is missing.")
    response["Content-Disposition"] = (
        f'attachment; filename="{snapshot.archive.name.rsplit("/", 1)[-1]}"'
    )
    return response


@login_required
@require_GET
def snapshot_file(
    request: HttpRequest, slug: str, version: int, name: str
) -> StreamingHttpResponse:
    snapshot = _snapshot_for(request, slug, version)
    try:
        chunks = services.snapshot_file_chunks(snapshot=snapshot, path=name)
    except ValidationError as exc:
        raise Http404("; ".join(exc.messages)) from None
    kind = _FILE_TYPES.get(PurePosixPath(name).suffix, "text/plain")
    response = StreamingHttpResponse(chunks, content_type=f"{kind}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
@require_GET
def statistics(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, *READ)
    latest = CorpusStatistics.objects.filter(project=project, snapshot=None).first()
    context = {"project": project, "role": role, "statistics": latest}
    return render(request, "corpus/statistics.html", context)


@login_required
@require_POST
def statistics_compute(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    params: dict[str, int] = {"project_id": project.pk}
    version = request.POST.get("snapshot", "")
    if version:
        if not version.isdigit():
            raise Http404("No such snapshot.")
        snapshot = get_object_or_404(Snapshot, project=project, version=int(version))
        params["snapshot_id"] = snapshot.pk
    job = job_enqueue(
        kind="corpus_statistics",
        params=params,
        project=project,
        created_by=signed_in_user(request),
        label=f"Statistics of {project.slug}" + (f" v{version}" if version else ""),
    )
    job_queued(request, job=job, text="Computing statistics as {job}.")
    return redirect(job)


@login_required
@require_GET
def statistics_chart(request: HttpRequest, slug: str, pk: int, kind: str) -> HttpResponseBase:
    project, role = project_for_page(request, slug, *READ)
    record = get_object_or_404(
        CorpusStatistics.objects.select_related("snapshot"), project=project, pk=pk
    )
    if record.snapshot_id and role != Role.RESEARCHER:
        raise PermissionDenied("Snapshots are the researchers'.")
    try:
        stored = services.statistics_chart(record=record, kind=kind)
    except ValidationError as exc:
        raise Http404("; ".join(exc.messages)) from None
    return media_response(request, stored, missing="The chart is missing.")
