"""demo.services.demo_seed: the offline demo, from synthetic audio and the ontology excerpt,
lived in: work waiting for review, approved captions exported, a qualification attempt to
grade and a first captioner queued to train."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import override_settings

from active.models import ProjectConfig, Retrain
from annotation.models import Assignment, Batch, Caption
from annotation.services import caption_problem, hit_claim
from core.jobs import job_kind
from core.models import Job, Project, Role
from core.services import job_cancel
from corpus.models import CorpusStatistics, Snapshot
from crowd.models import QualificationAttempt
from crowd.services import review_queue
from curation.models import Clip
from curation.synth import DEMO_SOUNDS
from demo.services import (
    DEMO_MODEL,
    DEMO_PASSWORD,
    DEMO_TRAINING,
    DEMO_USERS,
    DEMO_WORKERS,
    HOSTILE_SUFFIX,
    OFF_TOPIC,
    QUALIFICATION,
    demo_seed,
)
from modeling.models import TrainingRun
from tests.demo.conftest import (
    SYNTHSCENES,
    DemoSounds,
    database_state,
    quick_demo_seed,
    run_queued_training,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def seeded_once(
    django_db_setup: None,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
    demo_sounds: DemoSounds,
) -> Iterator[Project]:
    """The demo seeded once for the module (seeding takes seconds), inside a transaction
    rolled back at the end; each test runs in a savepoint of it (the db fixture), as with
    Django's TestCase.setUpTestData, so what one test changes the next never sees."""
    var = tmp_path_factory.mktemp("demo") / "var"
    with (
        django_db_blocker.unblock(),
        pytest.MonkeyPatch.context() as monkeypatch,
        override_settings(VAR_DIR=var, MEDIA_ROOT=var / "media"),
    ):
        outer = transaction.atomic()
        outer.__enter__()
        try:
            yield quick_demo_seed(monkeypatch=monkeypatch, sounds=demo_sounds)
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.fixture
def seeded(seeded_once: Project, db: None) -> Project:
    seeded_once.refresh_from_db()
    return seeded_once


def test_it_creates_a_user_per_role_with_the_demo_password(seeded: Project) -> None:
    for username, role in DEMO_USERS.items():
        user = get_user_model().objects.get(username=username)
        assert user.check_password(DEMO_PASSWORD)
        assert seeded.role_of(user) == role
        assert user.groups.filter(name=role).exists()


def test_it_creates_a_staff_admin(seeded: Project) -> None:
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_staff
    assert admin.is_superuser
    assert admin.check_password(DEMO_PASSWORD)


def test_it_creates_the_demo_project_led_by_the_researcher(seeded: Project) -> None:
    assert seeded.slug == "demo"
    assert seeded.created_by is not None
    assert seeded.created_by.username == "researcher"
    roles = dict(seeded.membership_set.values_list("user__username", "role"))
    assert roles == {**DEMO_USERS, **dict.fromkeys(DEMO_WORKERS, Role.ANNOTATOR)}


def test_its_demo_workers_cannot_log_in(seeded: Project) -> None:
    for username in DEMO_WORKERS:
        assert not get_user_model().objects.get(username=username).has_usable_password()


def test_it_imports_six_ready_clips_with_video_hints_and_labels(seeded: Project) -> None:
    clips = Clip.objects.filter(original_name__in=DEMO_SOUNDS)
    assert clips.count() == len(DEMO_SOUNDS) == 6
    media = Path(settings.MEDIA_ROOT)
    for clip in clips:
        assert clip.status == Clip.Status.READY
        assert clip.source == Clip.Source.LOCAL
        assert clip.video.name.endswith(".mp4")
        assert Path(clip.audio.path).is_relative_to(media)
        assert Path(clip.video.path).is_file()
        assert clip.duration_seconds == pytest.approx(10.0, abs=0.05)
        expected = set(DEMO_SOUNDS[clip.original_name][1])
        assert set(clip.labels.values_list("mid", flat=True)) == expected


def test_its_setup_jobs_succeed_and_only_the_training_waits_for_the_gpu_worker(
    seeded: Project,
) -> None:
    jobs = list(Job.objects.order_by("pk"))
    assert [j.kind for j in jobs if j.state == Job.State.SUCCEEDED] == [
        "ontology_import",
        "clips_import_local",
        "batch_flag",
        "snapshot_build",
        "snapshot_build",
    ]
    assert not [j for j in jobs if j.state in (Job.State.FAILED, Job.State.RUNNING)]
    queued = [j for j in jobs if j.state == Job.State.QUEUED]
    assert [(j.kind, job_kind(j.kind).queue) for j in queued] == [("active_retrain", "gpu")]


def test_it_changes_nothing_when_run_twice(seeded: Project) -> None:
    before = database_state()
    assert before["curation.Clip"][0] == 6 + sum(SYNTHSCENES.values())

    again = demo_seed()

    assert again == seeded
    assert database_state() == before


def test_it_changes_nothing_when_run_again_after_its_training(seeded: Project) -> None:
    assert [j.state for j in run_queued_training()] == [Job.State.SUCCEEDED] * 2
    before = database_state()

    demo_seed()

    assert database_state() == before


def test_it_publishes_a_batch_an_annotator_can_claim_at_once(seeded: Project) -> None:
    batch = Batch.objects.get(project=seeded)
    assert batch.state == Batch.State.PUBLISHED
    assert batch.hits.count() == 4  # the train split of the six demo clips

    assignment = hit_claim(worker=get_user_model().objects.get(username="annotator"))

    assert assignment is not None
    assert assignment.hit.batch == batch


def test_it_leaves_four_captions_for_review_the_off_topic_one_flagged_first(
    seeded: Project,
) -> None:
    queue = list(review_queue(project=seeded))

    assert len(queue) == 4
    assert {a.worker.username for a in queue} == {"annotator2", "worker_cho"}
    flagged = Caption.objects.get(assignment=queue[0])
    assert flagged.text == OFF_TOPIC
    evidence = {f.evidence["kind"]: f for f in flagged.flags.all()}
    assert set(evidence) == {"hints", "consensus"}
    assert evidence["hints"].reason == "Mentions none of the clip's word hints"
    assert evidence["consensus"].evidence["other_captions"] == 3
    assert not Caption.objects.filter(assignment__in=queue[1:], flags__isnull=False).exists()


def test_its_hostile_looking_caption_passes_the_caption_rules_as_written(
    seeded: Project,
) -> None:
    caption = Caption.objects.get(text__endswith=HOSTILE_SUFFIX)

    assert caption.assignment is not None
    assert caption.assignment.worker.username == "annotator2"
    assert caption.assignment.state == Assignment.State.SUBMITTED
    assert caption_problem(caption.text, min_words=3, max_words=40) is None


def test_it_approves_the_demo_workers_captions_with_one_fix(seeded: Project) -> None:
    approved = Caption.objects.filter(assignment__state=Assignment.State.APPROVED)

    assert approved.count() == 8
    assert set(approved.values_list("assignment__worker__username", flat=True)) == {
        "worker_ana",
        "worker_ben",
    }
    fixed = approved.exclude(fixed_text="").get()
    assert (fixed.text, fixed.fixed_text) == (
        "a dog barked loudly several times",
        "a dog barks loudly several times",
    )


def test_it_exports_the_approved_captions_as_jsonl_v1_and_clotho_v2_with_statistics(
    seeded: Project,
) -> None:
    snapshots = {s.version: s for s in Snapshot.objects.filter(project=seeded)}

    assert {v: (s.format, s.state) for v, s in snapshots.items()} == {
        1: (Snapshot.Format.JSONL, Snapshot.State.READY),
        2: (Snapshot.Format.CLOTHO, Snapshot.State.READY),
    }
    # the SynthScenes references (2 per train clip, 5 per val/test clip) and the crowd's
    # 8 approved captions of the 4 train clips
    assert snapshots[1].counts == {
        "train": {"clips": 3 + 4, "captions": 6 + 8},
        "val": {"clips": 1, "captions": 5},
        "test": {"clips": 1, "captions": 5},
    }
    for snapshot in snapshots.values():
        assert CorpusStatistics.objects.get(snapshot=snapshot).data["all"]["captions"] == 24
    live = CorpusStatistics.objects.get(project=seeded, snapshot=None)
    assert live.data["all"]["captions"] == 24


def test_its_jsonl_snapshot_can_train_a_captioner(seeded: Project) -> None:
    from modeling.services import run_start

    snapshot = Snapshot.objects.get(project=seeded, version=1)
    run = run_start(
        project=seeded, model_name="tempatt", snapshot=snapshot, created_by=None, enqueue=False
    )
    assert run.state == TrainingRun.State.QUEUED


def test_it_leaves_a_qualification_attempt_for_the_reviewer_to_grade(seeded: Project) -> None:
    attempt = QualificationAttempt.objects.get(qualification__name=QUALIFICATION)

    assert attempt.qualification.project == seeded
    assert attempt.worker.username == "annotator2"
    assert attempt.state == QualificationAttempt.State.SUBMITTED
    assert attempt.answers.count() == attempt.qualification.items.count() == 2
    assert all(item.gold_caption for item in attempt.qualification.items.all())


def test_it_queues_a_retrain_of_the_demo_captioner_on_the_gpu_queue(seeded: Project) -> None:
    retrain = Retrain.objects.get(project=seeded)

    assert retrain.job is not None
    assert (retrain.job.kind, retrain.job.state) == ("active_retrain", Job.State.QUEUED)
    assert retrain.trigger == Retrain.Trigger.MANUAL
    config = ProjectConfig.objects.get(project=seeded)
    assert (config.model_name, config.overrides) == (DEMO_MODEL, list(DEMO_TRAINING))


def test_its_queued_training_promotes_a_run_that_suggests_a_caption_for_every_clip(
    seeded: Project,
) -> None:
    from active.models import CurvePoint

    run_queued_training()

    run = TrainingRun.objects.get(project=seeded)
    assert run.state == TrainingRun.State.SUCCEEDED
    assert run.promoted_at is not None
    assert run.metrics["test"]["CIDEr-D"] is not None
    clips = Clip.objects.filter(subsets__project=seeded).distinct().count()
    assert run.suggestions.count() == clips == 6 + sum(SYNTHSCENES.values())
    assert CurvePoint.objects.filter(project=seeded, run=run).count() == 1


def test_it_queues_the_training_again_when_the_last_one_was_cancelled(seeded: Project) -> None:
    first = Retrain.objects.get(project=seeded)
    assert first.job is not None
    job_cancel(job=first.job)

    demo_seed()

    retrains = Retrain.objects.filter(project=seeded).order_by("pk")
    assert [r.job.state for r in retrains if r.job] == [Job.State.CANCELLED, Job.State.QUEUED]
