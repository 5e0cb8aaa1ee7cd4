"""Audio-visual and keyword captioners in the app: tiny V-ACT, AV captioner and MAAC runs
train through `run_execute` on SynthScenes with video and finish with metrics (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile

from core.models import Project
from corpus.models import Snapshot
from curation.models import Clip, Subset
from modeling import suggestions, training
from modeling.datasets import snapshot_splits
from modeling.ml import scst
from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.config_av import MAACConfig, VACTConfig
from modeling.models import Suggestion, TrainingRun
from tests.modeling.captioning import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.modeling.factories import (
    media_root_fixture,  # noqa: F401 (fixture)
    scenes_fixture,  # noqa: F401 (fixture)
    snapshot_fixture,  # noqa: F401 (fixture)
    start_tiny_run,
)

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


def _assert_finished_with_metrics(run: TrainingRun) -> None:
    assert run.state == TrainingRun.State.SUCCEEDED, run.error
    for split in ("val", "test"):
        assert isinstance(run.metrics[split]["CIDEr-D"], float)
        assert isinstance(run.metrics[split]["BLEU-4"], float)


@pytest.mark.parametrize("model", ["vact", "vact_video", "vact_concat", "video_only"])
def test_a_vact_run_trains_on_audio_and_the_clips_videos(
    project: Project, snapshot: Snapshot, model: str
) -> None:
    outcome = training.run_execute(run=start_tiny_run(project, snapshot, model, TINY))
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


def test_an_av_captioner_run_pretrains_with_mbp_then_fine_tunes_without_it(
    project: Project, snapshot: Snapshot
) -> None:
    # the recipe's MBP pre-training (model.mbp) and fine-tuning, one epoch each
    run = training.run_execute(
        run=start_tiny_run(project, snapshot, "crossmodal", [*TINY, "train.pretrain_epochs=1"])
    ).run

    _assert_finished_with_metrics(run)
    assert run.config["run"]["model"]["mbp"] is True
    steps = [row for row in run.learning_curve if "loss" in row]
    pretraining = [row for row in steps if row.get("stage") == "pretrain"]
    fine_tuning = [row for row in steps if "stage" not in row]  # the caption stage
    assert pretraining
    assert fine_tuning
    assert all(
        row["weight_audio"] + row["weight_video"] == pytest.approx(1.0) for row in pretraining
    )
    assert pretraining[-1]["weight_audio"] != 0.5
    assert not any("weight_audio" in row for row in fine_tuning)
    # fine-tuning at the recipe's 1e-5 (after its warm-up, decaying), pre-training above it
    assert max(row["lr"] for row in fine_tuning) == pytest.approx(1e-5)
    assert max(row["lr"] for row in pretraining) == pytest.approx(1e-4)


def test_clips_without_video_train_on_their_audio(project: Project, snapshot: Snapshot) -> None:
    Clip.objects.filter(pk__in=Clip.objects.order_by("pk").values("pk")[:3]).update(video="")
    outcome = training.run_execute(run=start_tiny_run(project, snapshot, "vact", TINY))
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

    outcome = training.run_execute(run=start_tiny_run(project, snapshot, "vact", TINY))
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
    outcome = training.run_execute(run=start_tiny_run(project, snapshot, "vact", TINY))
    run = outcome.run

    _assert_finished_with_metrics(run)
    assert outcome.video_counts["unreadable_video"] == 1


def test_a_vact_run_suggests_captions_reading_the_video(
    project: Project, snapshot: Snapshot, scenes: Subset
) -> None:
    run = training.run_execute(run=start_tiny_run(project, snapshot, "vact", TINY)).run
    result = suggestions.clips_caption(run=run, subset=scenes, beam_size=2)

    assert result["suggestions"] == 12
    assert Suggestion.objects.filter(run=run).count() == 12


def test_a_maac_run_pretrains_keywords_then_fine_tunes_on_cider(
    project: Project, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every reward the SCST stage is given, by call: (clip ids, rewards), baseline first
    given: list[tuple[list[str], list[float]]] = []
    references: list[dict[str, list[str]]] = []
    real_reward = scst.cider_reward

    def recording_reward(refs, vocab):
        references.append(dict(refs))
        reward = real_reward(refs, vocab)

        def recorded(captions, clip_ids):
            out = reward(captions, clip_ids)
            given.append((list(clip_ids), list(out)))
            return out

        return recorded

    monkeypatch.setattr(scst, "cider_reward", recording_reward)
    overrides = [
        "train.pretrain_epochs=2",
        "train.epochs=1",
        "train.scst_epochs=1",
        "train.batch_size=4",
        "train.log_every_steps=1",
        "features.n_mels=8",
        "features.hop_length=3200",
    ]
    run = training.run_execute(run=start_tiny_run(project, snapshot, "maac", overrides)).run

    _assert_finished_with_metrics(run)
    assert [row["stage"] for row in run.history] == ["pretrain", "pretrain", "caption", "scst"]
    # the reward is CIDEr-D against each clip's captions in the snapshot's train split
    train_clips = {
        str(clip.clip_id): sorted(clip.texts) for clip in snapshot_splits(snapshot)["train"].clips
    }
    assert len(train_clips) == 8
    assert {k: sorted(v) for k, v in references[0].items()} == train_clips
    # the curve logs, step by step, the mean reward of the samples and of the greedy baseline
    scst_rows = [row for row in run.learning_curve if row.get("stage") == "scst"]
    assert len(scst_rows) == len(given) // 2 == 2  # 8 training clips, 4 per batch
    for row, (baseline, samples) in zip(
        scst_rows, zip(given[::2], given[1::2], strict=True), strict=False
    ):
        assert baseline[0] == samples[0]
        assert set(baseline[0]) <= set(train_clips)
        assert row["baseline_reward"] == pytest.approx(sum(baseline[1]) / len(baseline[1]))
        assert row["reward"] == pytest.approx(sum(samples[1]) / len(samples[1]))
        assert row["lr"] == pytest.approx(5e-5)  # the recipe's SCST rate
    checkpoint = load_checkpoint(run.checkpoint.path)
    assert isinstance(checkpoint.model.config, MAACConfig)
    # the keyword vocabulary of the corpus (fewer words than the preset's 12 would be cut)
    assert 1 <= checkpoint.model.config.num_keywords <= 12


def test_video_settings_for_an_audio_only_model_are_refused(
    project: Project, snapshot: Snapshot
) -> None:
    with pytest.raises(ValidationError, match="Model lstm reads no video; drop fps=2"):
        start_tiny_run(project, snapshot, "lstm", ["video.fps=2"])


def test_a_bad_video_setting_is_refused_naming_it(project: Project, snapshot: Snapshot) -> None:
    with pytest.raises(ValidationError, match="encoder 'vgg' is not one of"):
        start_tiny_run(project, snapshot, "vact", ["video.encoder=vgg"])


def test_a_pretrained_video_encoder_sets_the_models_video_size(
    project: Project, snapshot: Snapshot
) -> None:
    run = start_tiny_run(
        project, snapshot, "crossmodal", ["video.encoder=s3d", "video.max_frames=64"]
    )
    model = run.config["run"]["model"]
    assert (model["video_dim"], model["video_frame_size"]) == (1024, 0)
    assert model["max_video_tokens"] >= 4  # 64 frames in chunks of 16
