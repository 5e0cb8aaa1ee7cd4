from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from django.core.management import CommandError, call_command

import synthscenes
from annotation.models import Caption
from core.models import Job, Project
from curation.models import Clip, Subset, SubsetClip
from curation.services import ontology_import
from modeling.ml.video import VideoConfig, read_frames
from modeling.services_synth import synthscenes_make
from tests.conftest import FIXTURES


@pytest.fixture
def ontology(db: None) -> None:
    ontology_import(path=FIXTURES / "audioset_ontology.json")


def make(*args: str) -> None:
    call_command("make_synthscenes", "--project", "sounds", *args)


def test_it_makes_clips_captions_and_a_split_subset(project: Project, ontology: None) -> None:
    make("--train", "3", "--val", "1", "--test", "1", "--seed", "5")

    subset = Subset.objects.get(project=project, slug="synthscenes-5-3-1-1")
    rows = SubsetClip.objects.filter(subset=subset).select_related("clip")
    assert Counter(r.split for r in rows) == {"train": 3, "val": 1, "test": 1}
    for row in rows:
        clip = row.clip
        index = int(clip.original_name.removesuffix(".wav").rsplit("-", 1)[1])
        scene = synthscenes.generate_scene(5, index, n_captions=5)
        assert clip.original_name == f"synth-5-{index}.wav"
        assert clip.status == Clip.Status.READY
        assert clip.sample_rate == 32_000
        assert sorted(clip.labels.values_list("mid", flat=True)) == sorted(scene.mids)
        captions = list(clip.captions.order_by("external_id"))
        wanted = 5 if row.split in ("val", "test") else 2
        assert [c.text for c in captions] == scene.captions[:wanted]
        assert [c.external_id for c in captions] == [
            f"synth-5-{index}#{n}" for n in range(1, wanted + 1)
        ]
        assert all(
            c.provenance == Caption.Provenance.IMPORTED and c.assignment_id is None
            for c in captions
        )
    job = Job.objects.get(kind="synthscenes_make")
    assert job.state == Job.State.SUCCEEDED
    assert job.project == project
    assert job.result["captions"] == 3 * 2 + 2 * 5


def test_running_it_again_changes_nothing(project: Project, ontology: None) -> None:
    make("--train", "2", "--seed", "1")
    before = (Clip.objects.count(), Caption.objects.count(), Subset.objects.count())
    make("--train", "2", "--seed", "1")
    assert (Clip.objects.count(), Caption.objects.count(), Subset.objects.count()) == before
    assert Job.objects.filter(kind="synthscenes_make").latest("pk").result["already_made"]


def test_clips_are_made_at_the_projects_sample_rate(project: Project, ontology: None) -> None:
    project.audio_sample_rate = 16_000
    project.save(update_fields=["audio_sample_rate"])
    result: dict[str, Any] = synthscenes_make(project=project, train=1, val=0, test=0, seed=2)
    assert result["created"] == 1
    assert Clip.objects.get().sample_rate == 16_000


def test_it_needs_the_ontology(project: Project) -> None:
    with pytest.raises(CommandError, match="import the ontology first"):
        make("--train", "1")
    assert not Clip.objects.exists()


def test_it_names_an_unknown_project(db: None) -> None:
    with pytest.raises(CommandError, match="No project with slug 'nope'"):
        call_command("make_synthscenes", "--project", "nope", "--train", "1")


def test_it_refuses_bad_counts(project: Project, ontology: None) -> None:
    with pytest.raises(CommandError, match="counts must be >= 0, got val=-1"):
        make("--train", "1", "--val", "-1")
    with pytest.raises(CommandError, match="train_captions must be 1 to 5"):
        make("--train", "1", "--train-captions", "7")
    assert not Clip.objects.exists()


def test_each_clip_keeps_its_scenes_video(project: Project, ontology: None) -> None:
    make("--train", "2", "--seed", "4")
    for clip in Clip.objects.all():
        index = int(clip.original_name.removesuffix(".wav").rsplit("-", 1)[1])
        assert clip.video.name.endswith(".mp4")
        frames = read_frames(
            clip.video.path,
            VideoConfig(fps=synthscenes.VIDEO_FPS, size=synthscenes.VIDEO_SIZE, max_frames=100),
        )
        rendered = synthscenes.render_video(synthscenes.generate_scene(4, index))
        assert frames.shape == rendered.shape
        assert abs(frames.astype(int) - rendered.astype(int)).mean() < 3


def test_scenes_can_be_made_without_video(project: Project, ontology: None) -> None:
    make("--train", "2", "--seed", "4", "--no-video")
    assert all(not clip.video for clip in Clip.objects.all())
