"""Reaching Prolific's REST API (settings.PROLIFIC_API_URL, `Authorization: Token …`),
and Prolific's ids for Earmark's rows."""

from __future__ import annotations

from typing import Any

import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError

from annotation.models import Batch, Platform, PlatformRef
from annotation.platforms import refs

PROLIFIC = Platform.PROLIFIC
Kind = PlatformRef.Kind
# the participant's page waits on Prolific's answer: seconds, not minutes
TIMEOUT_SECONDS = (5, 15)


class ProlificError(Exception):
    """Prolific refused a call or could not be reached; `status` is its HTTP status (0
    when unreachable) and the message its own words."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class ProlificUnconfirmed(ValidationError):
    """Prolific could not be asked just now: try again later."""


class ProlificClient:
    """The calls Earmark makes, each answering Prolific's JSON or raising ProlificError."""

    def __init__(self, *, base_url: str = "", token: str = "") -> None:
        self.base_url = (base_url or settings.PROLIFIC_API_URL).rstrip("/")
        self.token = token or settings.PROLIFIC_TOKEN
        if not self.token:
            raise ImproperlyConfigured("Set PROLIFIC_TOKEN to a Prolific API token first.")
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {self.token}"

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = f"{self.base_url}/{path.lstrip('/')}"
        try:
            response = self.session.request(method, url, json=body, timeout=TIMEOUT_SECONDS)
        except requests.RequestException as exc:
            raise ProlificError(f"Prolific could not be reached: {exc}") from None
        if response.status_code >= 400:
            raise ProlificError(
                f"Prolific answered {response.status_code} to {method} {path}: "
                f"{response.text[:500]}",
                status=response.status_code,
            )
        return response.json() if response.content else {}

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.call("POST", path, body or {})


def prolific_client() -> ProlificClient:
    return ProlificClient()


def study_id(batch: Batch) -> str:
    """The batch's study on Prolific, "" before it is made there."""
    return refs.external_id(platform=PROLIFIC, kind=Kind.BATCH, row=batch)
