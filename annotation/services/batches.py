"""Batches: publishing a subset as HITs, moving a batch between states, its progress."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count

from annotation.models import (
    Assignment,
    Batch,
    Caption,
    Hit,
    HitClip,
)
from core.models import Role
from core.services import require_role
from crowd.records import Requirements, requirements_record
from curation.models import Clip, Split, Subset, SubsetClip
from curation.recipes import MAX_CAPTIONS_PER_CLIP, RecipeSpec
from curation.services import subset_captions_per_clip

# AudioCaps collected one caption per training clip and five per validation/test clip; a
# batch asks what its subset's recipe says (subset_captions_per_clip), these by default.
DEFAULT_CAPTIONS_PER_CLIP: dict[str, int] = {
    split: RecipeSpec().captions_per_clip(split) for split in Split.values
}
MAX_CLIPS_PER_HIT = 50
# Upper bounds the batch form and the API state in their own units (a huge number would
# overflow a timedelta or the database's integer).
MAX_TIME_ALLOTTED = timedelta(days=1)
MAX_LIFETIME = timedelta(days=365)
MAX_AUTO_APPROVE_DELAY = timedelta(days=30)
MAX_REWARD_CENTS = 100_000
MAX_WORDS = 200


def batch_publish(
    *,
    subset: Subset,
    split: str,
    name: str,
    clips_per_hit: int,
    reward_cents: int | None,
    time_allotted: timedelta,
    lifetime: timedelta,
    created_by: User | None,
    reward_cents_per_clip: int | None = None,
    captions_per_clip: int | None = None,
    auto_approve_delay: timedelta = timedelta(days=3),
    min_words: int = 3,
    max_words: int = 40,
    mode: str = Batch.Mode.CAPTION,
    publish: bool = True,
    bonus_cap_cents: int | None = None,
    requirements: Requirements | None = None,
    estimated_minutes: int | None = None,
) -> Batch:
    """Creates a batch with one HIT per `clips_per_hit` clips of the subset's split, and
    publishes it unless `publish` is false. A HIT pays `reward_cents`, set by hand; None
    makes it `reward_cents_per_clip` (a preset's rate) times `clips_per_hit`, whatever
    clips per HIT the researcher settled on. A rate given beside a reward per HIT is kept
    to show the two side by side. `requirements` (who may take its HITs) are
    written in the same transaction, so no worker outside them can claim a HIT first.
    `created_by` None means a trusted caller (a management command); anyone else must be
    a researcher of the subset's project."""
    if created_by is not None:
        require_role(subset.project, created_by, Role.RESEARCHER)
    if split not in Split.values:
        raise ValidationError({"split": f"Unknown split {split!r}; use one of {Split.values}."})
    split = str(Split(split).value)
    if captions_per_clip is None:
        captions_per_clip = subset_captions_per_clip(subset=subset, split=split)
    reward_per_hit = _checked_batch_numbers(
        captions_per_clip=captions_per_clip,
        clips_per_hit=clips_per_hit,
        reward_cents=reward_cents,
        reward_cents_per_clip=reward_cents_per_clip,
        time_allotted=time_allotted,
        lifetime=lifetime,
        auto_approve_delay=auto_approve_delay,
        min_words=min_words,
        max_words=max_words,
    )
    in_split = SubsetClip.objects.filter(subset=subset, split=split)
    # Only fetched clips: a HIT whose audio is missing cannot be captioned.
    clip_ids = list(
        in_split.filter(clip__status=Clip.Status.READY)
        .order_by("clip_id")
        .values_list("clip_id", flat=True)
    )
    if not clip_ids:
        waiting = in_split.count()
        raise ValidationError(
            {
                "split": f"Subset {subset.slug!r} has no fetched clips in its {split!r} split"
                + (f" ({waiting} not fetched yet; fetch them first)." if waiting else ".")
            }
        )
    with transaction.atomic():
        batch = Batch(
            project=subset.project,
            subset=subset,
            split=split,
            name=name,
            mode=mode,
            captions_per_clip=captions_per_clip,
            clips_per_hit=clips_per_hit,
            reward_cents=reward_per_hit,
            reward_cents_per_clip=reward_cents_per_clip,
            reward_follows_clips=reward_cents is None,
            time_allotted=time_allotted,
            lifetime=lifetime,
            auto_approve_delay=auto_approve_delay,
            min_words=min_words,
            max_words=max_words,
            created_by=created_by,
            estimated_minutes=estimated_minutes,
        )
        if bonus_cap_cents is not None:
            batch.bonus_cap_cents = bonus_cap_cents
        batch.full_clean()
        batch.save()
        groups = [clip_ids[i : i + clips_per_hit] for i in range(0, len(clip_ids), clips_per_hit)]
        hits = Hit.objects.bulk_create(
            [Hit(batch=batch, max_assignments=captions_per_clip) for _ in groups], batch_size=1000
        )
        HitClip.objects.bulk_create(
            [
                HitClip(hit=hit, clip_id=clip_id, position=position)
                for hit, group in zip(hits, groups, strict=True)
                for position, clip_id in enumerate(group)
            ],
            batch_size=2000,
        )
        if requirements is not None and requirements.asks_anything():
            requirements_record(batch=batch, requirements=requirements)
        if publish:
            batch.move_to(Batch.State.PUBLISHED)
    return batch


def _checked_batch_numbers(
    *,
    captions_per_clip: int,
    clips_per_hit: int,
    reward_cents: int | None,
    reward_cents_per_clip: int | None,
    time_allotted: timedelta,
    lifetime: timedelta,
    auto_approve_delay: timedelta,
    min_words: int,
    max_words: int,
) -> int:
    """Refuses numbers out of bounds, naming each field; returns the reward per HIT."""
    errors: dict[str, str] = {}
    reward_per_hit = reward_cents
    if not 1 <= captions_per_clip <= MAX_CAPTIONS_PER_CLIP:
        errors["captions_per_clip"] = f"Ask for 1 to {MAX_CAPTIONS_PER_CLIP} captions per clip."
    if not 1 <= clips_per_hit <= MAX_CLIPS_PER_HIT:
        errors["clips_per_hit"] = f"Put 1 to {MAX_CLIPS_PER_HIT} clips in a HIT."
    if reward_cents is not None and not 0 <= reward_cents <= MAX_REWARD_CENTS:
        errors["reward_cents"] = f"Pay 0 to {MAX_REWARD_CENTS:,} cents per HIT."
    if reward_cents_per_clip is None:
        if reward_cents is None:
            errors["reward_cents"] = (
                "Give a reward per HIT, or a reward per clip to multiply by the clips per HIT."
            )
    elif not 0 <= reward_cents_per_clip <= MAX_REWARD_CENTS:
        errors["reward_cents_per_clip"] = f"Pay 0 to {MAX_REWARD_CENTS:,} cents per clip."
    elif reward_cents is None:
        reward_per_hit = reward_cents_per_clip * clips_per_hit
        if "clips_per_hit" not in errors and reward_per_hit > MAX_REWARD_CENTS:
            errors["reward_cents_per_clip"] = (
                f"{reward_cents_per_clip:,}¢ per clip times {clips_per_hit} clips is "
                f"{reward_per_hit:,}¢ per HIT; pay 0 to {MAX_REWARD_CENTS:,} cents per HIT."
            )
    if time_allotted <= timedelta(0):
        errors["time_allotted"] = "Workers need some time to do a HIT."
    elif time_allotted > MAX_TIME_ALLOTTED:
        errors["time_allotted"] = f"A worker may hold a HIT for at most {_days(MAX_TIME_ALLOTTED)}."
    if lifetime <= timedelta(0):
        errors["lifetime"] = "The batch needs a lifetime longer than zero."
    elif lifetime > MAX_LIFETIME:
        errors["lifetime"] = f"A batch is offered for at most {_days(MAX_LIFETIME)}."
    if not timedelta(0) <= auto_approve_delay <= MAX_AUTO_APPROVE_DELAY:
        errors["auto_approve_delay"] = (
            f"Submitted work is approved after 0 to {_days(MAX_AUTO_APPROVE_DELAY)}."
        )
    for name, words in (("min_words", min_words), ("max_words", max_words)):
        if not 1 <= words <= MAX_WORDS:
            errors[name] = f"Ask for 1 to {MAX_WORDS} words."
    if "min_words" not in errors and "max_words" not in errors and min_words > max_words:
        errors["min_words"] = "The minimum word count must be at least 1 and at most the maximum."
    if errors or reward_per_hit is None:
        raise ValidationError(errors)
    return reward_per_hit


def _days(span: timedelta) -> str:
    return "1 day" if span.days == 1 else f"{span.days:,} days"


def batch_move(*, batch: Batch, state: str, user: User) -> Batch:
    """Publishes, pauses, resumes or finishes a batch (researchers of its project).
    Pausing or finishing stops new claims; accepted assignments keep their time, as on
    MTurk, and may still be submitted."""
    require_role(batch.project, user, Role.RESEARCHER)
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(pk=batch.pk)
        batch.move_to(state)
    return batch


def batch_progress(*, batch: Batch) -> dict[str, int]:
    """Captions wanted, and how many are submitted, approved, rejected; HITs in progress."""
    clips = HitClip.objects.filter(hit__batch=batch).count()
    by_state = dict(
        Caption.objects.filter(assignment__hit__batch=batch)
        .values_list("assignment__state")
        .annotate(n=Count("id"))
        .values_list("assignment__state", "n")
    )
    return {
        "clips": clips,
        "wanted": clips * batch.captions_per_clip,
        "submitted": by_state.get(Assignment.State.SUBMITTED, 0),
        "approved": by_state.get(Assignment.State.APPROVED, 0),
        "rejected": by_state.get(Assignment.State.REJECTED, 0),
        "in_progress": Assignment.objects.filter(
            hit__batch=batch, state=Assignment.State.ACCEPTED
        ).count(),
    }
