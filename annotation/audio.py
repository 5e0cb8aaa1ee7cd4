"""A clip of an assignment's HIT served to its worker, the one way every page does it (the
HIT page, the MTurk page, the Prolific page; the work API reads its clip in one SQL query of
its own and applies the same rule through services.clip_audio_served_unless_held)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import get_object_or_404

from annotation import services
from annotation.models import Assignment
from core.media import ByteRange
from curation.serving import clip_audio_response


def assignment_clip_audio_response(
    request: HttpRequest, *, assignment: Assignment, clip_id: int, record: bool = True
) -> HttpResponseBase:
    """The audio of the clip `clip_id` of the assignment's HIT (404 for any other clip).
    With `record`, the bytes each answer carries go into the assignment's served record,
    which the submit reads (a caption is refused for a clip that cannot have played
    through); a replay, or a range inside what the record already holds, writes nothing."""
    hit_clip = get_object_or_404(services.hit_clips_served(assignment=assignment), clip_id=clip_id)
    held = services.audio_held(hit_clip)

    def served(part: ByteRange) -> None:
        if record:
            services.clip_audio_served_unless_held(
                assignment=assignment, clip=hit_clip.clip, held=held, part=part
            )

    return clip_audio_response(request, hit_clip.clip, on_served=served)
