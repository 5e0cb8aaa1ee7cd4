"""Disagreement flags: crafted captions fire the model, consensus and word-hint checks,
clean ones do not; flags carry their evidence, land in the review queue first, and the
batch reports its flag rate."""

from __future__ import annotations

from typing import Any

import pytest

from active.models import FlagCheck
from active.services.flags import batch_flag_rate, captions_flag, flags_sweep
from annotation.models import Assignment, Batch, Caption
from annotation.services import assignment_submit
from core.models import Job
from crowd.models import Flag
from crowd.services import review_queue
from curation.models import Clip
from modeling.models import TrainingRun
from tests.active.conftest import claim, hint, suggest
from tests.annotation.factories import listened
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

DOG = ["a dog barks loudly", "a dog barks twice nearby", "a small dog is barking", "dogs bark"]


def _caption(batch: Batch, clip: Clip, worker: Any, text: str) -> Caption:
    """A submitted caption of `worker` for `clip` (its own HIT)."""
    assignment = Assignment.objects.create(
        hit=batch.hits.get(hit_clips__clip=clip),
        worker=worker,
        state=Assignment.State.SUBMITTED,
        deadline="2100-01-01T00:00Z",
        submitted_at="2000-01-02T00:00Z",
        accepted_at="2000-01-01T00:00Z",
    )
    return Caption.objects.create(assignment=assignment, clip=clip, text=text)


@pytest.fixture
def dog_clip(batch: Batch, clips: list[Clip]) -> Clip:
    """A clip hinted "dog" with three agreeing captions, and others giving CIDEr-D a corpus."""
    clip = clips[0]
    hint(clip, "dog", "Bark")
    for i, text in enumerate(DOG[:3]):
        _caption(batch, clip, make_user(f"w{i}"), text)
    for clip_other, text in zip(
        clips[1:], ["rain falls on a tin roof", "a siren wails", "a man speaks"], strict=True
    ):
        _caption(batch, clip_other, make_user(f"o{clip_other.pk}"), text)
    return clip


def _flags(caption: Caption) -> list[str]:
    return sorted(f.evidence["kind"] for f in Flag.objects.filter(caption=caption))


def test_a_caption_disagreeing_with_the_others_and_the_hints_is_flagged(
    batch: Batch, dog_clip: Clip, ann: Any
) -> None:
    odd = _caption(batch, dog_clip, ann, "a siren wails in the distance")

    result = captions_flag(captions=Caption.objects.filter(pk=odd.pk), project=batch.project)

    assert result == {"checked": 1, "flagged": 1}
    assert _flags(odd) == ["consensus", "hints"]
    consensus = Flag.objects.get(caption=odd, evidence__kind="consensus")
    assert consensus.reason == "Disagrees with the clip's other captions"
    assert consensus.evidence["other_captions"] == 3
    assert consensus.evidence["leave_one_out_cider_d"] < consensus.evidence["threshold"]
    assert FlagCheck.objects.get(caption=odd).kinds == ["consensus", "hints"]


def test_a_caption_far_from_a_confident_suggestion_is_flagged(
    batch: Batch, clips: list[Clip], dog_clip: Clip, promoted: TrainingRun, ann: Any
) -> None:
    suggest(promoted, clips[1], "rain falls on a roof", entropy=0.2)
    odd = _caption(batch, clips[1], ann, "a dog barks twice")

    captions_flag(captions=Caption.objects.filter(pk=odd.pk), project=batch.project)

    flag = Flag.objects.get(caption=odd, evidence__kind="model")
    assert flag.evidence["suggestion"] == "rain falls on a roof"
    assert flag.evidence["run"] == promoted.pk


def test_the_model_check_defers_to_the_clips_other_captions(
    batch: Batch, dog_clip: Clip, promoted: TrainingRun, ann: Any, settings: Any
) -> None:
    suggest(promoted, dog_clip, "rain falls on a tin roof", entropy=0.2)  # sure, and wrong
    agreeing = _caption(batch, dog_clip, ann, "a dog barks loudly twice")
    captions_flag(captions=Caption.objects.filter(pk=agreeing.pk), project=batch.project)
    assert _flags(agreeing) == []

    settings.ACTIVE_FLAG_MODEL_DEFERS_TO_CONSENSUS = False
    FlagCheck.objects.all().delete()
    captions_flag(captions=Caption.objects.filter(pk=agreeing.pk), project=batch.project)
    assert _flags(agreeing) == ["model"]


def test_a_clean_caption_is_checked_and_not_flagged(
    batch: Batch, dog_clip: Clip, promoted: TrainingRun, ann: Any
) -> None:
    suggest(promoted, dog_clip, "a dog barks loudly", entropy=0.2)
    clean = _caption(batch, dog_clip, ann, "a dog barks loudly twice")

    assert captions_flag(captions=Caption.objects.filter(pk=clean.pk), project=batch.project) == {
        "checked": 1,
        "flagged": 0,
    }
    assert not Flag.objects.filter(caption=clean).exists()
    assert FlagCheck.objects.get(caption=clean).kinds == []


def test_checking_twice_does_not_flag_twice(batch: Batch, dog_clip: Clip, ann: Any) -> None:
    odd = _caption(batch, dog_clip, ann, "a siren wails in the distance")
    captions_flag(captions=Caption.objects.filter(pk=odd.pk), project=batch.project)
    again = captions_flag(captions=Caption.objects.filter(pk=odd.pk), project=batch.project)
    assert again == {"checked": 0, "flagged": 0}
    assert Flag.objects.filter(caption=odd).count() == 2


def test_the_batch_reports_its_flag_rate(batch: Batch, dog_clip: Clip, ann: Any) -> None:
    odd = _caption(batch, dog_clip, ann, "a siren wails in the distance")
    captions_flag(
        captions=Caption.objects.filter(assignment__hit__batch=batch), project=batch.project
    )

    rate = batch_flag_rate(batch=batch)

    assert rate["checked"] == Caption.objects.filter(assignment__hit__batch=batch).count() == 7
    assert rate["flagged"] >= 1
    assert rate["rate"] == pytest.approx(rate["flagged"] / 7)
    assert rate["by_kind"]["consensus"] >= 1
    assert FlagCheck.objects.get(caption=odd).batch == batch


def test_flagged_work_comes_first_in_the_review_queue(
    batch: Batch, dog_clip: Clip, ann: Any
) -> None:
    odd = _caption(batch, dog_clip, ann, "a siren wails in the distance")
    captions_flag(captions=Caption.objects.filter(pk=odd.pk), project=batch.project)
    assert review_queue(project=batch.project).first() == odd.assignment


def test_submitting_queues_the_check_and_the_job_flags(
    batch: Batch, dog_clip: Clip, ann: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from core.services import job_run

    settings.ACTIVE_FLAG_ON_SUBMIT = True
    assignment = claim(ann, batch)  # equal priorities: the oldest HIT
    assert assignment.hit.hit_clips.get().clip == dog_clip
    with django_capture_on_commit_callbacks(execute=False):
        assignment_submit(
            assignment=listened(assignment),
            worker=ann,
            captions={dog_clip.pk: "a siren wails far away"},
        )
    job = Job.objects.get(kind="captions_flag")
    assert job.params == {"assignment_id": assignment.pk}
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.result == {"checked": 1, "flagged": 1}


def _submit_odd(batch: Batch, clip: Clip, worker: Any) -> Assignment:
    assignment = claim(worker, batch)
    assert assignment.hit.hit_clips.get().clip == clip
    return assignment_submit(
        assignment=listened(assignment), worker=worker, captions={clip.pk: "a siren wails far away"}
    )


def test_by_default_a_submit_queues_no_job_of_its_own(
    batch: Batch, dog_clip: Clip, ann: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        _submit_odd(batch, dog_clip, ann)
    assert not Job.objects.exists()


def test_the_sweep_queues_one_job_per_batch_with_unchecked_captions_and_it_flags(
    batch: Batch, dog_clip: Clip, ann: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from core.services import job_run

    with django_capture_on_commit_callbacks(execute=False):
        odd = _submit_odd(batch, dog_clip, ann)
        (job,) = flags_sweep()
    assert (job.kind, job.params, job.project_id) == (
        "batch_flag",
        {"batch_id": batch.pk},
        batch.project_id,
    )
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.result["flagged"] >= 1
    assert "consensus" in _flags(Caption.objects.get(assignment=odd))


def test_the_sweep_leaves_a_batch_alone_while_its_check_is_queued(
    batch: Batch, dog_clip: Clip, ann: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        _submit_odd(batch, dog_clip, ann)
        assert len(flags_sweep()) == 1
        assert flags_sweep() == []
    assert Job.objects.filter(kind="batch_flag").count() == 1


def test_the_sweep_has_nothing_to_do_once_every_caption_was_checked(
    batch: Batch, dog_clip: Clip
) -> None:
    captions_flag(captions=Caption.objects.all(), project=batch.project)
    assert flags_sweep() == []


def test_with_a_flag_model_the_job_flags_by_meaning_and_stores_the_score(
    batch: Batch, dog_clip: Clip, ann: Any, flag_model_installed: Any
) -> None:
    lazy = _caption(batch, dog_clip, ann, "A sound is heard.")

    captions_flag(captions=Caption.objects.filter(pk=lazy.pk), project=batch.project)

    flag = Flag.objects.get(caption=lazy, evidence__kind="consensus")
    assert flag.evidence["check"] == "meaning"
    assert flag.reason.startswith("Likely generic: names no particular sound")
    assert flag.reason.endswith(f"; {round(100 * flag.evidence['probability'])} %")
    check = FlagCheck.objects.get(caption=lazy)
    assert check.score == pytest.approx(flag.evidence["score"], abs=1e-4)


def test_the_flag_job_and_the_benchmark_call_the_same_check(
    batch: Batch, dog_clip: Clip, ann: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """benchmarks/flags_real.py measures what the job does: both go through
    active.flagmodel.caption_check with the job's thresholds; this fails if either stops."""
    from active import flagmodel
    from active.services.flags import flag_thresholds
    from benchmarks import flags_real

    real = flagmodel.caption_check
    callers: list[tuple[str, Any]] = []

    def spy(**kwargs: Any) -> Any:
        callers.append((kwargs["text"], kwargs["thresholds"]))
        return real(**kwargs)

    monkeypatch.setattr(flagmodel, "caption_check", spy)
    odd = _caption(batch, dog_clip, ann, "a siren wails in the distance")
    captions_flag(captions=Caption.objects.filter(pk=odd.pk), project=batch.project)
    assert callers == [("a siren wails in the distance", flag_thresholds())]

    callers.clear()
    clips = [[*DOG[:3], "a siren wails in the distance"]]
    flags_real.evaluate(clips, {(0, 3): "off-topic"}, model=None, thresholds=flag_thresholds())
    assert [text for text, _ in callers] == clips[0]
    assert {thresholds for _, thresholds in callers} == {flag_thresholds()}


def test_build_flag_model_learns_from_the_configured_captions_into_the_var_dir(
    settings: Any, tmp_path: Any
) -> None:
    from django.core.management import call_command

    from active import flagmodel
    from active.services.flags import flag_model, flag_model_path
    from tests.conftest import FLAG_FIXTURES

    settings.ACTIVE_FLAG_MODEL_DIR = tmp_path / "flags"
    settings.ACTIVE_FLAG_MODEL_CAPTIONS = [
        FLAG_FIXTURES / "clotho_development_head.csv",
        FLAG_FIXTURES / "audiocaps_train_head.csv",
    ]
    call_command("build_flag_model")

    path = flag_model_path()
    assert path == tmp_path / "flags" / f"flag-model-v{flagmodel.VERSION}.npz"
    assert path.is_file()
    model = flag_model(build_missing=False)
    assert model is not None
    assert model.detector is not None
    assert model.captions > 2000


def test_with_too_little_to_learn_from_the_flags_fall_back_to_cider_d(
    batch: Batch, dog_clip: Clip, ann: Any, settings: Any, tmp_path: Any
) -> None:
    from active.services.flags import flag_model, flag_model_path

    settings.ACTIVE_FLAG_MODEL_DIR = tmp_path / "flags"
    settings.ACTIVE_FLAG_MODEL_AUTOBUILD = True
    assert flag_model() is None  # seven captions in the database, no caption files
    assert not flag_model_path().exists()
    odd = _caption(batch, dog_clip, ann, "a siren wails in the distance")
    captions_flag(captions=Caption.objects.filter(pk=odd.pk), project=batch.project)
    assert (
        "leave_one_out_cider_d"
        in Flag.objects.get(caption=odd, evidence__kind="consensus").evidence
    )


def test_a_missing_flag_model_is_learned_on_first_use(settings: Any, tmp_path: Any) -> None:
    from active.services.flags import flag_model, flag_model_path
    from tests.conftest import FLAG_FIXTURES

    settings.ACTIVE_FLAG_MODEL_DIR = tmp_path / "flags"
    settings.ACTIVE_FLAG_MODEL_CAPTIONS = [
        FLAG_FIXTURES / "clotho_development_head.csv",
        FLAG_FIXTURES / "audiocaps_train_head.csv",
    ]
    assert flag_model() is None  # the test settings learn nothing implicitly
    settings.ACTIVE_FLAG_MODEL_AUTOBUILD = True

    model = flag_model()

    assert model is not None
    assert flag_model_path().is_file()
    assert flag_model() is model  # read once per process
