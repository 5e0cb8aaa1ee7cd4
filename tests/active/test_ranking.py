"""batch_rank: a batch's strategy writes ClipScore rows and the HIT priorities hit_claim
follows."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from active.models import BatchConfig, ClipScore
from active.services.ranking import batch_configure, batch_rank
from annotation.models import Batch, Hit
from core.models import Job
from curation.models import Clip
from modeling.models import TrainingRun
from tests.active.conftest import claim, hint, suggest

pytestmark = pytest.mark.django_db


def _hit_of(clip: Clip) -> Hit:
    return Hit.objects.get(hit_clips__clip=clip)


def test_uncertainty_orders_hits_by_the_promoted_models_entropy(
    batch: Batch, clips: list[Clip], promoted: TrainingRun, alice: Any, ann: Any
) -> None:
    for clip, entropy in zip(clips, [0.2, 2.0, 0.9, 1.4], strict=True):
        suggest(promoted, clip, "a dog barks", entropy=entropy)

    batch_configure(batch=batch, user=alice, strategy="uncertainty", presuggest="blind")

    ranks = dict(ClipScore.objects.filter(batch=batch).values_list("clip_id", "rank"))
    assert [ranks[c.pk] for c in clips] == [4, 1, 3, 2]
    priorities = [_hit_of(c).priority for c in clips]
    assert priorities == [0.25, 1.0, 0.5, 0.75]
    assert BatchConfig.objects.get(batch=batch).ranked_with == promoted
    # the engine hands out the most uncertain clip first
    assert claim(ann).hit == _hit_of(clips[1])


def test_clips_the_model_never_heard_come_first(
    batch: Batch, clips: list[Clip], promoted: TrainingRun, alice: Any
) -> None:
    for clip in clips[:3]:
        suggest(promoted, clip, "a dog barks", entropy=1.0)

    batch_configure(batch=batch, user=alice, strategy="uncertainty", presuggest="blind")

    first = ClipScore.objects.get(batch=batch, rank=1)
    assert (first.clip_id, first.score) == (clips[3].pk, None)


def test_committee_uses_other_runs_suggestions(
    batch: Batch, clips: list[Clip], promoted: TrainingRun, snapshot: Any, alice: Any
) -> None:
    from tests.active.conftest import other_run

    second = other_run(batch.project, snapshot)
    texts = ["a dog barks", "rain falls on a roof", "a siren wails", "a man speaks"]
    for clip, text in zip(clips, texts, strict=True):
        suggest(promoted, clip, text)
        # the other model agrees on every clip but the third
        suggest(second, clip, "a car horn honks twice" if text == "a siren wails" else text)

    batch_configure(batch=batch, user=alice, strategy="committee", presuggest="blind")

    first = ClipScore.objects.get(batch=batch, rank=1)
    assert first.clip_id == clips[2].pk
    assert first.details["members"] == 2
    assert _hit_of(clips[2]).priority == 1.0


def test_diversity_needs_no_model_and_favours_uncovered_hints(
    batch: Batch, clips: list[Clip], alice: Any
) -> None:
    hint(clips[0], "dog", "Bark")
    hint(clips[1], "dog", "Bark")
    hint(clips[2], "siren", "Siren")
    hint(clips[3], "dog", "Bark")

    batch_configure(batch=batch, user=alice, strategy="diversity", presuggest="blind")

    ranks = dict(ClipScore.objects.filter(batch=batch).values_list("clip_id", "rank"))
    assert ranks[clips[2].pk] in (1, 2)
    assert ranks[clips[0].pk] == 1 or ranks[clips[2].pk] == 1
    assert ranks[clips[3].pk] == 4  # the third dog clip adds least


def test_hybrid_spreads_the_uncertain_clips_over_labels(
    batch: Batch, clips: list[Clip], promoted: TrainingRun, alice: Any
) -> None:
    for clip, entropy in zip(clips, [2.0, 1.9, 1.0, 0.2], strict=True):
        suggest(promoted, clip, "a dog barks", entropy=entropy)
    hint(clips[0], "dog", "Bark")
    hint(clips[1], "dog", "Bark")
    hint(clips[2], "siren", "Siren")
    hint(clips[3], "siren", "Siren")

    batch_configure(batch=batch, user=alice, strategy="hybrid", presuggest="blind")

    # uncertainty alone: 0, 1, 2, 3; the second dog clip now waits for the first siren one
    ranks = dict(ClipScore.objects.filter(batch=batch).values_list("clip_id", "rank"))
    assert [ranks[c.pk] for c in clips] == [1, 3, 2, 4]
    assert _hit_of(clips[0]).priority == 1.0


def test_random_writes_a_permutation_of_priorities(batch: Batch, alice: Any) -> None:
    batch_configure(batch=batch, user=alice, strategy="random", presuggest="blind", seed=3)
    assert sorted(Hit.objects.filter(batch=batch).values_list("priority", flat=True)) == [
        0.25, 0.5, 0.75, 1.0,
    ]  # fmt: skip


def test_reranking_replaces_the_scores(batch: Batch, alice: Any) -> None:
    batch_configure(batch=batch, user=alice, strategy="random", presuggest="blind")
    batch_rank(batch=batch)
    assert ClipScore.objects.filter(batch=batch).count() == 4


def test_only_researchers_choose_the_strategy(batch: Batch, rey: Any) -> None:
    with pytest.raises(PermissionDenied):
        batch_configure(batch=batch, user=rey, strategy="random", presuggest="blind")


def test_an_unknown_strategy_is_refused_and_nothing_changes(batch: Batch, alice: Any) -> None:
    with pytest.raises(ValidationError, match="Unknown strategy 'loudest'"):
        batch_configure(batch=batch, user=alice, strategy="loudest", presuggest="blind")
    assert not ClipScore.objects.exists()
    assert not BatchConfig.objects.filter(batch=batch, ranked_at__isnull=False).exists()


def test_the_rank_batch_command_runs_the_job(batch: Batch) -> None:
    from django.core.management import call_command

    call_command("rank_batch", "--batch", str(batch.pk))
    job = Job.objects.get(kind="batch_rank")
    assert job.state == Job.State.SUCCEEDED
    assert job.result["clips"] == 4
