"""JSON API for researchers' scripts: /api/, schema at /api/openapi.json, docs at /api/docs.

Authenticate with `Authorization: Bearer <token>` (tokens from /account/tokens/), or with
the browser session (CSRF-checked) for the app's own pages.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import NinjaAPI, Router, Schema
from ninja.responses import Status
from ninja.security import HttpBearer, SessionAuth

from active.api import router as active_router
from annotation.api import router as annotation_router
from core import services
from core.models import Job, Membership, Project
from core.schemas import ErrorOut, JobOut
from corpus.api import router as corpus_router
from corpus.evaluation_api import router as evaluation_router
from curation.api import router as curation_router
from modeling.api import router as modeling_router


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        user = services.api_token_authenticate(raw=token)
        if user is not None:
            request.user = user
        return user


class SessionCookieAuth(SessionAuth):
    """The browser session, CSRF-checked; skipped when there is no session cookie, so a
    script with a wrong token gets 401 rather than a CSRF error."""

    def _get_key(self, request: HttpRequest) -> str | None:
        if settings.SESSION_COOKIE_NAME not in request.COOKIES:
            return None
        return super()._get_key(request)


api = NinjaAPI(
    title="Earmark API",
    version="1",
    description=__doc__ or "",
    auth=[TokenAuth(), SessionCookieAuth()],
)


class ProjectOut(Schema):
    slug: str
    name: str
    description: str
    role: str


projects = Router(tags=["projects"])
jobs = Router(tags=["jobs"])


@projects.get("/", response=list[ProjectOut])
def project_list(request: HttpRequest) -> list[dict[str, str]]:
    rows = Membership.objects.filter(user=request.user).select_related("project")
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
    role = project.role_of(request.user)
    if role is None:
        return Status(404, {"detail": "No such project."})
    return {
        "slug": project.slug,
        "name": project.name,
        "description": project.description,
        "role": role,
    }


def _visible_job(request: HttpRequest, job_id: int) -> Job:
    return get_object_or_404(Job.objects.visible_to(request.user), pk=job_id)


@jobs.get("/", response=list[JobOut])
def job_list(
    request: HttpRequest, state: str | None = None, project: str | None = None, limit: int = 50
) -> Any:
    rows = Job.objects.visible_to(request.user).select_related("project")
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
        return Status(201, services.job_retry(job=job, user=request.user))
    except ValidationError as exc:
        return Status(409, {"detail": "; ".join(exc.messages)})


@jobs.post("/{job_id}/cancel", response={200: JobOut, 409: ErrorOut})
def job_cancel(request: HttpRequest, job_id: int) -> Any:
    job = _visible_job(request, job_id)
    try:
        return Status(200, services.job_cancel(job=job))
    except ValidationError as exc:
        return Status(409, {"detail": "; ".join(exc.messages)})


api.add_router("/projects", projects)
api.add_router("/jobs", jobs)

api.add_router("/", curation_router)  # /api/projects/{slug}/recipes…, /api/labels
api.add_router("/", evaluation_router)  # /api/projects/{slug}/evaluations…
api.add_router("/", corpus_router)  # /api/projects/{slug}/snapshots…, …/statistics
api.add_router("/", modeling_router)  # /api/projects/{slug}/runs…
api.add_router("/", annotation_router)  # /api/projects/{slug}/batches…, /api/work/…
api.add_router("/", active_router)  # /api/projects/{slug}/active…, …/batches/{id}/active
