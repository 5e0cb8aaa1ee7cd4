"""JSON API for researchers' scripts: /api/, schema at /api/openapi.json, docs at /api/docs.

Authenticate with `Authorization: Bearer <token>` (tokens from /account/tokens/), or with
the browser session (CSRF-checked) for the app's own pages.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import Error
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Swagger
from ninja.errors import HttpError
from ninja.openapi.schema import OpenAPISchema
from ninja.security import HttpBearer, SessionAuth

from active.api import router as active_router
from annotation.api import router as annotation_router
from core import api as core_api
from core import services, throttling
from core.middleware import DATABASE_UNAVAILABLE
from corpus.api import router as corpus_router
from corpus.evaluation_api import router as evaluation_router
from crowd.api import router as crowd_router
from curation.api import router as curation_router
from modeling.api import router as modeling_router

# what a read-only token may send: requests that change nothing
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        # a valid token is looked up and never refused for bad ones; a client that keeps
        # sending bad tokens with this one's prefix is answered 429 for a while: a broken
        # script stops hammering, and other tokens from the same address (a lab behind one
        # NAT, Label Studio) are never refused for it
        holder = services.api_token_authenticate(raw=token)
        if holder is None:
            if refusal := throttling.bad_tokens_refusal(request, token):
                raise HttpError(429, refusal)
            throttling.bad_token_record(request, token)
            return None
        if holder.read_only and request.method not in SAFE_METHODS:
            raise HttpError(
                403,
                f"This API token is read-only: it may read (GET), not {request.method}. "
                "Use a token with full access, from /account/tokens/.",
            )
        request.user = holder.user
        return holder.user


class SessionCookieAuth(SessionAuth):
    """The browser session, CSRF-checked; skipped when there is no session cookie, so a
    script with a wrong token gets 401 rather than a CSRF error."""

    def _get_key(self, request: HttpRequest) -> str | None:
        if settings.SESSION_COOKIE_NAME not in request.COOKIES:
            return None
        return super()._get_key(request)


class EarmarkAPI(NinjaAPI):
    """NinjaAPI with its OpenAPI schema built once per process: the routes do not change
    while it runs, and building it took the first /api/docs view ~2 s on a loaded 2-core
    machine (benchmarks/RESULTS.md, pages)."""

    _schemas: dict[str, OpenAPISchema]

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> OpenAPISchema:
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        schemas = self.__dict__.setdefault("_schemas", {})
        if path_prefix not in schemas:
            schemas[path_prefix] = super().get_openapi_schema(path_prefix=path_prefix)
        return schemas[path_prefix]


api = EarmarkAPI(
    # Swagger UI with its tags folded and without its Schemas section: drawing every
    # operation and schema of the ~70 took Chromium 2.6-3.5 s on a loaded 2-core VM, folded
    # 1.8 s (benchmarks/RESULTS.md, pages); a tag opens with one click, and each operation
    # still shows its request and response schemas.
    docs=Swagger(settings={"defaultModelsExpandDepth": -1, "docExpansion": "none"}),
    title="Earmark API",
    version="1",
    description=__doc__ or "",
    auth=[TokenAuth(), SessionCookieAuth()],
    # per user (API_RATE_PER_USER); claim and submit add their own (API_RATE_WORK)
    throttle=[throttling.PER_USER],
)


@api.exception_handler(RequestDataTooBig)
def request_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    """413 with a JSON message for a body over UPLOAD_MAX_BYTES, where Django would answer
    its HTML 400 page (or a 500, with the body read outside its request handling)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return api.create_response(
        request,
        {
            "detail": f"The request body is larger than {limit:,} bytes (the server's "
            "UPLOAD_MAX_BYTES); send less at a time."
        },
        status=413,
    )


def _database_unavailable(request: HttpRequest, exc: Error | type[Error]) -> HttpResponse:
    # Ninja answers any exception with a traceback under DEBUG; these go on to the site's
    # middleware (core.middleware), which answers 503 with Retry-After either way.
    raise exc


for _error in DATABASE_UNAVAILABLE:
    api.add_exception_handler(_error, _database_unavailable)

api.add_router("/projects", core_api.projects)
api.add_router("/jobs", core_api.jobs)

api.add_router("/", curation_router)  # /api/projects/{slug}/recipes…, /api/labels
api.add_router("/", evaluation_router)  # /api/projects/{slug}/evaluations…
api.add_router("/", corpus_router)  # /api/projects/{slug}/snapshots…, …/statistics
api.add_router("/", modeling_router)  # /api/projects/{slug}/runs…
api.add_router("/", annotation_router)  # /api/projects/{slug}/batches…, /api/work/…
api.add_router("/", crowd_router)  # /api/projects/{slug}/review, …/assignments/{id}…
api.add_router("/", active_router)  # /api/projects/{slug}/active…, …/batches/{id}/active
