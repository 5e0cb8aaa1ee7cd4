"""demo.services.demo_seed: the offline demo, from synthetic audio and the ontology excerpt."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from core.models import Job, Membership, Project, Role
from curation import synth
from curation.models import Clip, Label
from curation.synth import DEMO_SOUNDS
from demo import services as demo
from demo.services import DEMO_PASSWORD, DEMO_USERS, demo_seed

pytestmark = pytest.mark.django_db

SYNTHSCENES = {"train": 3, "val": 1, "test": 1}  # the demo makes 24/6/6


@pytest.fixture(scope="module")
def demo_sounds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    """The synthetic WAVs and videos, generated once for the module (ffmpeg is slow)."""
    folder = tmp_path_factory.mktemp("demo-sounds")
    return folder, synth.generate_demo_sounds(folder)


@pytest.fixture
def seeded(
    settings: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    demo_sounds: tuple[Path, dict[str, list[str]]],
) -> Project:
    settings.VAR_DIR = tmp_path / "var"
    settings.MEDIA_ROOT = tmp_path / "var" / "media"
    generated, labels = demo_sounds

    def copy_demo_sounds(folder: Path, **_: Any) -> dict[str, list[str]]:
        shutil.copytree(generated, folder, dirs_exist_ok=True)
        return labels

    monkeypatch.setattr(synth, "generate_demo_sounds", copy_demo_sounds)
    monkeypatch.setattr(demo, "DEMO_SYNTHSCENES", SYNTHSCENES)
    return demo_seed()


def _counts() -> dict[str, int]:
    return {
        "users": get_user_model().objects.count(),
        "projects": Project.objects.count(),
        "memberships": Membership.objects.count(),
        "labels": Label.objects.count(),
        "edges": Label.children.through.objects.count(),
        "clips": Clip.objects.count(),
        "clip_labels": Clip.labels.through.objects.count(),
        "jobs": Job.objects.count(),
    }


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
    assert roles == {**DEMO_USERS}
    assert roles["researcher"] == Role.RESEARCHER


def test_it_imports_six_ready_clips_with_video_hints_and_labels(
    seeded: Project, tmp_path: Path
) -> None:
    clips = Clip.objects.filter(original_name__in=DEMO_SOUNDS)
    assert clips.count() == len(DEMO_SOUNDS) == 6
    media = tmp_path / "var" / "media"
    for clip in clips:
        assert clip.status == Clip.Status.READY
        assert clip.source == Clip.Source.LOCAL
        assert clip.video.name.endswith(".mp4")
        assert Path(clip.audio.path).is_relative_to(media)
        assert Path(clip.video.path).is_file()
        assert clip.duration_seconds == pytest.approx(10.0, abs=0.05)
        expected = set(DEMO_SOUNDS[clip.original_name][1])
        assert set(clip.labels.values_list("mid", flat=True)) == expected


def test_it_records_two_succeeded_jobs(seeded: Project) -> None:
    jobs = Job.objects.order_by("pk")
    assert [(j.kind, j.state) for j in jobs] == [
        ("ontology_import", Job.State.SUCCEEDED),
        ("clips_import_local", Job.State.SUCCEEDED),
    ]
    assert jobs[1].project == seeded
    assert jobs[1].result["created"] == 6


def test_it_changes_nothing_when_run_twice(seeded: Project) -> None:
    before = _counts()
    assert before["clips"] == 6 + sum(SYNTHSCENES.values())

    again = demo_seed()

    assert again == seeded
    assert _counts() == before


def test_it_publishes_a_batch_an_annotator_can_claim_at_once(seeded: Project) -> None:
    from django.contrib.auth import get_user_model

    from annotation.models import Batch
    from annotation.services import hit_claim

    batch = Batch.objects.get(project=seeded)
    assert batch.state == Batch.State.PUBLISHED
    assert batch.hits.count() == 4  # the train split of the six demo clips

    assignment = hit_claim(worker=get_user_model().objects.get(username="annotator"))

    assert assignment is not None
    assert assignment.hit.batch == batch


def test_it_makes_synthscenes_and_a_snapshot_to_train_on(seeded: Project) -> None:
    from corpus.models import Snapshot
    from modeling.services import run_start

    snapshot = Snapshot.objects.get(project=seeded)
    assert snapshot.state == Snapshot.State.READY
    assert snapshot.format == Snapshot.Format.JSONL
    assert snapshot.counts["train"] == {"clips": 3, "captions": 6}
    assert snapshot.counts["test"] == {"clips": 1, "captions": 5}
    run = run_start(
        project=seeded, model_name="tempatt", snapshot=snapshot, created_by=None, enqueue=False
    )
    assert run.state == "queued"
