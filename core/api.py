"""Core's API endpoints: the projects you are in, and the jobs you may see (/api/projects/,
/api/jobs/). earmark.api mounts them."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Router, Schema
from ninja.responses import Status

from core import services
from core.access import signed_in_user
from core.models import Job, Membership, Project
from core.schemas import ErrorOut, JobOut


class ProjectOut(Schema):
    slug: str
    name: str
    description: str
    role: str


projects = Router(tags=["projects"])
jobs = Router(tags=["jobs"])


@projects.get("/", response=list[ProjectOut])
def project_list(request: HttpRequest) -> list[dict[str, str]]:
    rows = Membership.objects.filter(user=signed_in_user(request)).select_related("project")
    return [
        {
            "slug": m.project.slug,
            "name": m.project.name,
            "description": m.project.description,
            "role": m.role,
        }
        for m in rows
    ]


@projects.get("/{slug}", response={200: ProjectOut, 404: ErrorOut})
def project_get(request: HttpRequest, slug: str) -> Any:
    project = get_object_or_404(Project, slug=slug)
    role = project.role_of(signed_in_user(request))
    if role is None:
        return Status(404, {"detail": "No such project."})
    return {
        "slug": project.slug,
        "name": project.name,
        "description": project.description,
        "role": role,
    }


def _visible_job(request: HttpRequest, job_id: int) -> Job:
    return get_object_or_404(Job.objects.visible_to(signed_in_user(request)), pk=job_id)


@jobs.get("/", response=list[JobOut])
def job_list(
    request: HttpRequest, state: str | None = None, project: str | None = None, limit: int = 50
) -> Any:
    rows = Job.objects.visible_to(signed_in_user(request)).select_related("project")
    if state:
        rows = rows.filter(state=state)
    if project:
        rows = rows.filter(project__slug=project)
    return rows[: max(1, min(limit, 500))]


@jobs.get("/{job_id}", response=JobOut)
def job_get(request: HttpRequest, job_id: int) -> Job:
    return _visible_job(request, job_id)


@jobs.post("/{job_id}/retry", response={201: JobOut, 409: ErrorOut})
def job_retry(request: HttpRequest, job_id: int) -> Any:
    job = _visible_job(request, job_id)
    try:
        return Status(201, services.job_retry(job=job, user=signed_in_user(request)))
    except ValidationError as exc:
        return Status(409, {"detail": "; ".join(exc.messages)})


@jobs.post("/{job_id}/cancel", response={200: JobOut, 409: ErrorOut})
def job_cancel(request: HttpRequest, job_id: int) -> Any:
    job = _visible_job(request, job_id)
    try:
        return Status(200, services.job_cancel(job=job))
    except ValidationError as exc:
        return Status(409, {"detail": "; ".join(exc.messages)})
