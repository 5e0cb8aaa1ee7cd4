"""A clip's stored media, checked before it is served or trained on.

The fetch and the imports verify every file before a clip turns `ready`, but a file can
break afterwards: deleted by hand, emptied by a full disk, cut short by an interrupted
copy, restored from an old backup. Served as it is, it plays as silence or not at all
and the clip keeps being offered. A broken audio file makes its clip `failed` with the
reason instead (and `media_broken_at`): the claim stops offering HITs that hold it
(annotation's `claimable_hits`), a fetch run fetches a YouTube clip again, and importing
the same local file again restores an uploaded one.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from curation import media
from curation.models import Clip

log = logging.getLogger(__name__)

# How long an audio file that passed the check is trusted, per clip, file name and size:
# a player's range requests and replays are answered without reading the header again,
# and a file emptied or deleted since is still caught (its size is read every time).
AUDIO_CHECK_TTL_SECONDS = 3600


class ClipMediaBroken(Exception):
    """A clip's stored file cannot be played; the message names the clip and the reason."""


def _stored_size(storage: Any, name: str) -> int | None:
    """The stored file's size in bytes; None when storage has no such file."""
    try:
        return int(storage.size(name))
    except FileNotFoundError:
        return None
    except Exception:
        # A bucket answers a missing key with an error of its own; any other failure is
        # storage being unreachable, which must not mark clips failed.
        if not storage.exists(name):
            return None
        raise


def audio_check_key(clip_id: int) -> str:
    """The cache key saying which file of the clip passed the check (its name and size,
    f"{name}:{size}"): one key a clip, so a request that knows only the clip's id (the
    work API's audio GET, whose throttle reads it in its own round trip) can read it."""
    return f"clip-audio-ok:{clip_id}"


def clip_audio_problem(clip: Clip, *, cached: dict[str, Any] | None = None) -> str | None:
    """Why the clip's stored audio cannot be played ("its audio file … is empty"), or
    None: also None for a clip with no audio yet (not fetched), which is not broken.
    Reads the file's size and, unless this file passed within AUDIO_CHECK_TTL_SECONDS, its
    header (curation.media.stored_audio_problem); never decodes the samples. `cached`: the
    values a caller already read from the cache (audio_check_key's among them when set),
    where the check would otherwise ask the cache itself."""
    if not clip.audio:
        return None
    storage, name = clip.audio.storage, clip.audio.name
    size = _stored_size(storage, name)
    if size is None:
        return f"its audio file {name} is missing from storage"
    key, passed = audio_check_key(clip.pk), f"{name}:{size}"
    if (cache.get(key) if cached is None else cached.get(key)) == passed:
        return None
    try:
        with storage.open(name, "rb") as handle:
            problem = media.stored_audio_problem(
                handle, size=size, expected_seconds=clip.duration_seconds
            )
    except FileNotFoundError:
        return f"its audio file {name} is missing from storage"
    if problem is not None:
        return f"its audio file {name} {problem}"
    cache.set(key, passed, AUDIO_CHECK_TTL_SECONDS)
    return None


def clip_mark_broken(*, clip: Clip, reason: str) -> Clip:
    """Marks a ready clip `failed` because its stored media broke (`reason`, as
    clip_audio_problem says it), and returns the clip as stored. A clip a fetch or an
    import gave another file meanwhile, or that is not ready, is left as it is. The
    clip's earlier fetch attempts are forgotten: they succeeded, so a YouTube clip gets a
    full set of attempts to be fetched again."""
    remedy = (
        "fetch it again (fetch_clips or Fetch clips on its subset)"
        if clip.source == Clip.Source.YOUTUBE
        else "import the same file again to restore it"
    )
    with transaction.atomic():
        locked = Clip.objects.select_for_update().get(pk=clip.pk)
        if locked.status != Clip.Status.READY or locked.audio.name != clip.audio.name:
            return locked
        locked.status = Clip.Status.FAILED
        locked.error = f"Broken after it was stored: {reason}; {remedy}."
        locked.fetch_attempts = 0
        locked.media_broken_at = timezone.now()
        locked.save(update_fields=["status", "error", "fetch_attempts", "media_broken_at"])
    log.warning("clip %s marked failed: %s", clip.pk, reason)
    return locked


def clip_audio_check(*, clip: Clip, cached: dict[str, Any] | None = None) -> None:
    """Passes when the clip's stored audio can be played (or it has none yet); otherwise
    marks the clip failed (clip_mark_broken) and raises ClipMediaBroken saying why.
    `cached` as for clip_audio_problem."""
    problem = clip_audio_problem(clip, cached=cached)
    if problem is None:
        return
    clip_mark_broken(clip=clip, reason=problem)
    raise ClipMediaBroken(
        f"The audio of clip {clip.pk} cannot be played: {problem}. The clip is marked "
        "failed and is no longer offered for captioning."
    )


def clip_video_problem(clip: Clip) -> str | None:
    """Why the clip's stored video hint cannot be shown (missing from storage, empty), or
    None; also None for a clip without one. The browser reads the video's container
    itself; a deleted or emptied file is what the server sees without decoding it."""
    if not clip.video:
        return None
    size = _stored_size(clip.video.storage, clip.video.name)
    if size is None:
        return f"its video hint {clip.video.name} is missing from storage"
    if size == 0:
        return f"its video hint {clip.video.name} is empty (0 bytes)"
    return None
