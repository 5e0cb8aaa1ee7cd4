"""Uploads only where an upload is expected.

Django hands a multipart request's file parts to its upload handlers whatever the view:
held in memory up to FILE_UPLOAD_MAX_MEMORY_SIZE, then spooled to a temporary file, and
DATA_UPLOAD_MAX_MEMORY_SIZE counts only the other fields. So an anonymous 200 MB multipart
POST to /login/ was written to /tmp before any view looked at it. RefuseUnexpectedUploads
comes first among FILE_UPLOAD_HANDLERS: on a view not marked with @accepts_uploads it
refuses a body over UPLOAD_MAX_BYTES from its Content-Length, before reading a byte, and
drops any file part unread into memory or disk; views that take files are unchanged (each
checks its own limit: ARCHIVE_UPLOAD_MAX_BYTES, the Label Studio import's, a recipe's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import HttpRequest

View = TypeVar("View", bound=Callable[..., Any])

# API operations (django-ninja names each URL after its function) that take files
_API_OPERATIONS: set[str] = set()


def accepts_uploads(view: View) -> View:
    """Marks a view (a page, or an API operation under its @router decorator) as one
    that takes uploaded files."""
    view.accepts_uploads = True  # type: ignore[attr-defined]
    _API_OPERATIONS.add(view.__name__)
    return view


def takes_uploads(request: HttpRequest | None) -> bool:
    """Whether the view the request resolved to takes uploaded files."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return False
    if getattr(match.func, "accepts_uploads", False):
        return True
    return bool(match.route.startswith("api/") and match.url_name in _API_OPERATIONS)


class RefuseUnexpectedUploads(FileUploadHandler):
    def handle_raw_input(
        self,
        input_data: Any,
        META: dict[str, str],
        content_length: int,
        boundary: str,
        encoding: str | None = None,
    ) -> None:
        self.expected = takes_uploads(self.request)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if not self.expected and limit is not None and content_length > limit:
            raise RequestDataTooBig(
                f"A request body of {content_length:,} bytes to a page that takes no "
                f"upload; at most UPLOAD_MAX_BYTES ({limit:,} bytes)."
            )

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        if not self.expected:
            raise SkipFile()  # read past, never held or spooled
        super().new_file(*args, **kwargs)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        return raw_data  # the next handler (memory, then a temporary file) keeps it

    def file_complete(self, file_size: int) -> None:
        return None
