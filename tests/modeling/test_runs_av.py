"""Audio-visual and keyword captioners in the app: tiny V-ACT, AV captioner and MAAC runs
train through `run_execute` on SynthScenes with video and finish with metrics (CPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile

from core.models import Project
from corpus.models import Snapshot
from corpus.services import snapshot_build, snapshot_create
from curation.models import Clip, Subset
from curation.services import ontology_import
from modeling import services
from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.config_av import MAACConfig, VACTConfig
from modeling.models import Suggestion, TrainingRun
from modeling.services_synth import synthscenes_make
from tests.conftest import FIXTURES
from tests.modeling.captioning import one_torch_thread  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db

TINY = [
    "train.epochs=2",
    "train.batch_size=4",
    "train.log_every_steps=1",
    "features.n_mels=8",
    "features.hop_length=6400",
    "video.size=12",
    "video.fps=1",
]


@pytest.fixture
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.FEATURE_CACHE_DIR = tmp_path / "features"
    return settings.MEDIA_ROOT


@pytest.fixture
def scenes(project: Project, media_root: Path) -> Subset:
    ontology_import(path=FIXTURES / "audioset_ontology.json")
    result = synthscenes_make(project=project, train=8, val=2, test=2, seed=7)
    return Subset.objects.get(project=project, slug=result["subset"])


@pytest.fixture
def snapshot(project: Project, scenes: Subset, alice: Any) -> Snapshot:
    created = snapshot_create(
        project=project, fmt="jsonl", text="raw", splits=["train", "val", "test"], created_by=alice
    )
    return snapshot_build(snapshot=created)


def _start(project: Project, snapshot: Snapshot, model: str, overrides: list[str]) -> TrainingRun:
    return services.run_start(
        project=project,
        model_name=model,
        snapshot=snapshot,
        created_by=None,
        preset="tiny",
        overrides=overrides,
        enqueue=False,
    )


def _assert_finished_with_metrics(run: TrainingRun) -> None:
    assert run.state == TrainingRun.State.SUCCEEDED, run.error
    for split in ("val", "test"):
        assert isinstance(run.metrics[split]["CIDEr-D"], float)
        assert isinstance(run.metrics[split]["BLEU-4"], float)


@pytest.mark.parametrize("model", ["vact", "vact_video", "vact_concat", "video_only"])
def test_a_vact_run_trains_on_audio_and_the_clips_videos(
    project: Project, snapshot: Snapshot, model: str
) -> None:
    outcome = services.run_execute(run=_start(project, snapshot, model, TINY))
    run = outcome.run

    _assert_finished_with_metrics(run)
    assert outcome.video_counts == {
        "with_video": 12,
        "without_video": 0,
        "unreadable_video": 0,
        "features_video": 0,
    }
    assert run.config["video"]["size"] == 12
    checkpoint = load_checkpoint(run.checkpoint.path)
    assert isinstance(checkpoint.model.config, VACTConfig)
    assert checkpoint.model.config.video_frame_size == 12  # raw frames, trainable CNN
    assert checkpoint.model.config.feature_dim == 8


def test_an_av_captioner_run_trains_with_mbp_and_logs_the_weights(
    project: Project, snapshot: Snapshot
) -> None:
    run = services.run_execute(
        run=_start(project, snapshot, "crossmodal", [*TINY, "model.mbp=true"])
    ).run

    _assert_finished_with_metrics(run)
    steps = [row for row in run.learning_curve if "loss" in row]
    assert steps
    assert all(row["weight_audio"] + row["weight_video"] == pytest.approx(1.0) for row in steps)
    assert steps[-1]["weight_audio"] != 0.5


def test_clips_without_video_train_on_their_audio(project: Project, snapshot: Snapshot) -> None:
    Clip.objects.filter(pk__in=Clip.objects.order_by("pk").values("pk")[:3]).update(video="")
    outcome = services.run_execute(run=_start(project, snapshot, "vact", TINY))
    run = outcome.run

    _assert_finished_with_metrics(run)
    assert outcome.video_counts["without_video"] == 3


def test_a_run_reads_the_features_video_in_place_of_the_hint(
    project: Project, snapshot: Snapshot
) -> None:
    # each of three clips gets a copy of its hint as its features video, then a broken hint:
    # reading the hint would count them unreadable
    for clip in Clip.objects.order_by("pk")[:3]:
        hint = Path(clip.video.path)
        clip.video_features.save(f"sharp-{clip.pk}.mp4", ContentFile(hint.read_bytes()))
        hint.write_bytes(b"not a video")

    outcome = services.run_execute(run=_start(project, snapshot, "vact", TINY))
    run = outcome.run

    _assert_finished_with_metrics(run)
    assert outcome.video_counts["unreadable_video"] == 0
    assert outcome.video_counts["features_video"] == 3
    assert outcome.video_counts["with_video"] == 12


def test_an_unreadable_video_is_counted_and_its_clip_trains_on_audio(
    project: Project, snapshot: Snapshot
) -> None:
    clip = Clip.objects.order_by("pk").first()
    assert clip is not None
    Path(clip.video.path).write_bytes(b"not a video")
    outcome = services.run_execute(run=_start(project, snapshot, "vact", TINY))
    run = outcome.run

    _assert_finished_with_metrics(run)
    assert outcome.video_counts["unreadable_video"] == 1


def test_a_vact_run_suggests_captions_reading_the_video(
    project: Project, snapshot: Snapshot, scenes: Subset
) -> None:
    run = services.run_execute(run=_start(project, snapshot, "vact", TINY)).run
    result = services.clips_caption(run=run, subset=scenes, beam_size=2)

    assert result["suggestions"] == 12
    assert Suggestion.objects.filter(run=run).count() == 12


def test_a_maac_run_pretrains_keywords_then_fine_tunes_on_cider(
    project: Project, snapshot: Snapshot
) -> None:
    overrides = [
        "train.pretrain_epochs=2",
        "train.epochs=1",
        "train.scst_epochs=1",
        "train.batch_size=4",
        "train.log_every_steps=1",
        "features.n_mels=8",
        "features.hop_length=3200",
    ]
    run = services.run_execute(run=_start(project, snapshot, "maac", overrides)).run

    _assert_finished_with_metrics(run)
    assert [row["stage"] for row in run.history] == ["pretrain", "pretrain", "caption", "scst"]
    scst = [row for row in run.learning_curve if row.get("stage") == "scst"]
    assert scst
    assert all(row["reward"] >= 0.0 for row in scst)
    checkpoint = load_checkpoint(run.checkpoint.path)
    assert isinstance(checkpoint.model.config, MAACConfig)
    # the keyword vocabulary of the corpus (fewer words than the preset's 12 would be cut)
    assert 1 <= checkpoint.model.config.num_keywords <= 12


def test_maac_runs_default_to_the_three_stages(project: Project, snapshot: Snapshot) -> None:
    run = _start(project, snapshot, "maac", [])
    train = run.config["run"]["train"]
    assert (train["pretrain_epochs"], train["scst_epochs"], train["lr"]) == (10, 10, 3e-4)


def test_video_settings_for_an_audio_only_model_are_refused(
    project: Project, snapshot: Snapshot
) -> None:
    with pytest.raises(ValidationError, match="Model lstm reads no video; drop fps=2"):
        _start(project, snapshot, "lstm", ["video.fps=2"])


def test_a_bad_video_setting_is_refused_naming_it(project: Project, snapshot: Snapshot) -> None:
    with pytest.raises(ValidationError, match="encoder 'vgg' is not one of"):
        _start(project, snapshot, "vact", ["video.encoder=vgg"])


def test_a_pretrained_video_encoder_sets_the_models_video_size(
    project: Project, snapshot: Snapshot
) -> None:
    run = _start(project, snapshot, "crossmodal", ["video.encoder=s3d", "video.max_frames=64"])
    model = run.config["run"]["model"]
    assert (model["video_dim"], model["video_frame_size"]) == (1024, 0)
    assert model["max_video_tokens"] >= 4  # 64 frames in chunks of 16
