"""Pre-suggestion: blind batches never put model output on the HIT page, edit batches
start each box from the suggestion and store the edit distance; reviewers always see the
suggestion next to the caption."""

from __future__ import annotations

import math
from typing import Any

import pytest

from active.models import CaptionEdit, Presuggestion
from active.services.ranking import batch_configure
from annotation.models import Batch
from annotation.services import assignment_submit
from curation.models import Clip
from modeling.models import Suggestion, TrainingRun
from tests.active.conftest import claim, suggest
from tests.annotation.factories import listened
from tests.conftest import login

pytestmark = pytest.mark.django_db

SUGGESTION = "a machine hums steadily nearby"


@pytest.fixture
def suggested(clips: list[Clip], promoted: TrainingRun) -> list[Clip]:
    for clip in clips:
        suggest(promoted, clip, SUGGESTION, entropy=0.4)
    return clips


def test_a_blind_batch_never_shows_the_suggestion(
    batch: Batch, suggested: list[Clip], alice: Any, ann: Any
) -> None:
    batch_configure(batch=batch, user=alice, strategy="random", presuggest="blind")
    assignment = claim(ann)
    page = login(ann).get(assignment.get_absolute_url())
    assert page.status_code == 200
    assert SUGGESTION not in page.content.decode()
    assert not Presuggestion.objects.exists()


def test_a_batch_without_settings_is_blind(batch: Batch, suggested: list[Clip], ann: Any) -> None:
    assignment = claim(ann)
    assert SUGGESTION not in login(ann).get(assignment.get_absolute_url()).content.decode()


def test_an_edit_batch_starts_the_box_from_the_suggestion(
    batch: Batch, suggested: list[Clip], alice: Any, ann: Any
) -> None:
    batch_configure(batch=batch, user=alice, strategy="random", presuggest="edit")
    assignment = claim(ann)
    page = login(ann).get(assignment.get_absolute_url()).content.decode()
    assert f">{SUGGESTION}</textarea>" in page
    shown = Presuggestion.objects.get(assignment=assignment)
    assert shown.text == SUGGESTION


def test_an_edit_mode_caption_stores_its_edit_distance(
    batch: Batch, suggested: list[Clip], alice: Any, ann: Any
) -> None:
    batch_configure(batch=batch, user=alice, strategy="random", presuggest="edit")
    assignment = claim(ann)
    login(ann).get(assignment.get_absolute_url())
    clip = assignment.hit.hit_clips.get().clip

    assignment_submit(
        assignment=listened(assignment),
        worker=ann,
        captions={clip.pk: "a machine hums loudly nearby"},
    )

    edit = CaptionEdit.objects.get(caption__assignment=assignment)
    assert edit.suggested_text == SUGGESTION
    assert edit.word_distance == 1
    assert edit.char_distance == 5  # "steadily" -> "loudly"


def test_a_blind_caption_stores_no_edit(
    batch: Batch, suggested: list[Clip], alice: Any, ann: Any
) -> None:
    assignment = claim(ann)
    login(ann).get(assignment.get_absolute_url())
    clip = assignment.hit.hit_clips.get().clip
    assignment_submit(
        assignment=listened(assignment), worker=ann, captions={clip.pk: "a dog barks twice"}
    )
    assert not CaptionEdit.objects.exists()


def test_the_suggestion_stays_put_when_another_run_is_promoted(
    batch: Batch, suggested: list[Clip], alice: Any, ann: Any, snapshot: Any
) -> None:
    from django.utils import timezone

    from modeling.models import TrainingRun as Run
    from tests.active.conftest import other_run

    batch_configure(batch=batch, user=alice, strategy="random", presuggest="edit")
    assignment = claim(ann)
    login(ann).get(assignment.get_absolute_url())
    Run.objects.update(promoted_at=None)
    newer = other_run(batch.project, snapshot, promoted_at=timezone.now())
    suggest(newer, assignment.hit.hit_clips.get().clip, "rain falls on a roof")
    page = login(ann).get(assignment.get_absolute_url()).content.decode()
    assert SUGGESTION in page
    assert "rain falls on a roof" not in page


def test_reviewers_see_the_suggestion_beside_the_caption(
    batch: Batch, suggested: list[Clip], ann: Any, rey: Any
) -> None:
    assignment = claim(ann)
    clip = assignment.hit.hit_clips.get().clip
    assignment_submit(
        assignment=listened(assignment), worker=ann, captions={clip.pk: "a dog barks twice"}
    )
    page = login(rey).get(f"/projects/{batch.project.slug}/review/").content.decode()
    assert 'data-testid="model-suggestion"' in page
    assert SUGGESTION in page


def _reviewed_page(batch: Batch, ann: Any, rey: Any) -> str:
    assignment = claim(ann)
    clip = assignment.hit.hit_clips.get().clip
    assignment_submit(
        assignment=listened(assignment), worker=ann, captions={clip.pk: "a dog barks twice"}
    )
    return login(rey).get(f"/projects/{batch.project.slug}/review/").content.decode()


def test_reviewers_see_how_confident_the_model_was(
    batch: Batch, suggested: list[Clip], ann: Any, rey: Any
) -> None:
    Suggestion.objects.update(mean_entropy=math.log(2))  # choosing between two words

    page = _reviewed_page(batch, ann, rey)

    assert '<span data-testid="suggestion-confidence">50% confident</span>' in page


def test_reviewers_see_no_suggestion_below_the_confidence_floor(
    batch: Batch, suggested: list[Clip], ann: Any, rey: Any, settings: Any
) -> None:
    settings.SUGGESTION_MIN_CONFIDENCE = 0.6
    Suggestion.objects.update(mean_entropy=math.log(2))

    page = _reviewed_page(batch, ann, rey)

    assert 'data-testid="model-suggestion"' not in page
    assert SUGGESTION not in page
