"""What a request gets while the database is away: 503 with Retry-After, not a 500.

An OperationalError or InterfaceError (the server restarting or down, a connection
terminated or timed out, SQLite's "database is locked") says nothing about the request
itself: sent again in a moment it will most likely pass. So the site answers 503 Service
Unavailable with `Retry-After`, a short page for browsers and `{"detail": …}` for the API,
and logs the error with its traceback. Other database errors (an IntegrityError is a bug
or a race the code must handle) stay 500s.

Each service's write runs in one transaction, so the error leaves nothing half-stored; and
the write crowdworkers repeat, a HIT submit, answers a repeat of captions it already
stored with what it stored (annotation.services.assignment_submit), never twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

log = logging.getLogger(__name__)

# Seconds a client is asked to wait. A dropped connection heals on the next request (the
# connection health checks); a restarting server takes a few seconds more.
RETRY_AFTER_SECONDS = 10
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
API_PREFIX = "/api/"
MESSAGE = "The database is not answering right now. Try again in a moment."


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """The 503 answer: JSON under /api/, an HTML page elsewhere. The page is rendered
    without the request, so no context processor queries the database again."""
    response: HttpResponse
    if request.path_info.startswith(API_PREFIX):
        response = JsonResponse({"detail": MESSAGE}, status=503)
    else:
        page = render_to_string("database_unavailable.html", {"seconds": RETRY_AFTER_SECONDS})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


class DatabaseUnavailableMiddleware:
    """Turns a view's OperationalError or InterfaceError into database_unavailable's 503,
    with DEBUG too (the traceback goes to the log): a worker mid-HIT must learn that
    sending again is safe, not read a stack trace."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DATABASE_UNAVAILABLE):
            return None
        log.warning(
            "database unavailable during %s %s: %s",
            request.method,
            request.path,
            exception,
            exc_info=exception,
        )
        return database_unavailable(request)
