"""Serving a clip's audio to whoever may hear it: the HIT page, the MTurk page,
qualification tests and the clip list answer through `clip_audio_response` (the work API
through `clip_audio_check` and `NO_AUDIO_YET` itself, to answer in JSON), so a broken file
is found, its clip marked failed and the request told why, wherever it is played
(curation.services.clip_media)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseNotFound
from django.http.response import HttpResponseBase

from core.media import ByteRange, media_response
from curation.models import Clip
from curation.services import ClipMediaBroken, clip_audio_check

NO_AUDIO_YET = "This clip has no audio yet."


def clip_audio_response(
    request: HttpRequest, clip: Clip, *, on_served: Callable[[ByteRange], None] | None = None
) -> HttpResponseBase:
    """The clip's audio with Range support (core.media), or 404: the site's page when the
    clip has no audio yet, and a plain-text reason when its stored file is missing, empty
    or not audio (the clip is then marked failed). A player shows neither, but whoever
    opens the address reads why. `on_served` hears the bytes answered (core.media)."""
    try:
        clip_audio_check(clip=clip)
    except ClipMediaBroken as exc:
        return HttpResponseNotFound(str(exc), content_type="text/plain; charset=utf-8")
    return media_response(request, clip.audio, missing=NO_AUDIO_YET, on_served=on_served)
