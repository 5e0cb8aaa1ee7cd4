"""annotation's workflows, one module per topic, re-exported here so callers import
`annotation.services`:

- `batches`: publishing a subset as HITs, batch states and progress;
- `assignments`: the assignment engine (claim, submit, return, review, expiry) and the
  caption rules a submit applies;
- `hit_page`: what the HIT page records (audio served, clips heard, video hints opened,
  broken clips);
- `workers`: a worker's own summary.
"""

from __future__ import annotations

from annotation.services.assignments import (
    assignment_locked,
    assignment_return,
    assignment_review,
    assignment_submit,
    assignments_expire,
    caption_limits,
    caption_problem,
    claimable_hits,
    hit_claim,
    slot_release,
    submissions_provisional,
)
from annotation.services.batches import (
    DEFAULT_CAPTIONS_PER_CLIP,
    MAX_AUTO_APPROVE_DELAY,
    MAX_CAPTIONS_PER_CLIP,
    MAX_CLIPS_PER_HIT,
    MAX_LIFETIME,
    MAX_REWARD_CENTS,
    MAX_TIME_ALLOTTED,
    MAX_WORDS,
    batch_move,
    batch_progress,
    batch_publish,
)
from annotation.services.hit_page import (
    HEARD_SHARE,
    AudioHeld,
    audio_held,
    audio_served_holds,
    clip_audio_served,
    clip_audio_served_unless_held,
    clip_heard,
    clip_report,
    clip_seconds,
    hit_clips_served,
    video_hint_open,
)
from annotation.services.workers import REVIEW_STATES, WorkerSummary, worker_summary

__all__ = [
    "DEFAULT_CAPTIONS_PER_CLIP",
    "HEARD_SHARE",
    "MAX_AUTO_APPROVE_DELAY",
    "MAX_CAPTIONS_PER_CLIP",
    "MAX_CLIPS_PER_HIT",
    "MAX_LIFETIME",
    "MAX_REWARD_CENTS",
    "MAX_TIME_ALLOTTED",
    "MAX_WORDS",
    "REVIEW_STATES",
    "AudioHeld",
    "WorkerSummary",
    "assignment_locked",
    "assignment_return",
    "assignment_review",
    "assignment_submit",
    "assignments_expire",
    "audio_held",
    "audio_served_holds",
    "batch_move",
    "batch_progress",
    "batch_publish",
    "caption_limits",
    "caption_problem",
    "claimable_hits",
    "clip_audio_served",
    "clip_audio_served_unless_held",
    "clip_heard",
    "clip_report",
    "clip_seconds",
    "hit_claim",
    "hit_clips_served",
    "slot_release",
    "submissions_provisional",
    "video_hint_open",
    "worker_summary",
]
