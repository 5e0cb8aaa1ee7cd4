"""Training runs in the app: from a snapshot of SynthScenes to a checkpoint, metrics and
suggestions, through the same services the gpu-queue job calls (tiny models, CPU)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from core.models import Job, Project
from corpus.models import Snapshot
from corpus.services import snapshot_build, snapshot_create
from curation.models import Clip, Subset
from modeling import datasets, planning, scoring, services, suggestions, training
from modeling.ml import trainer as trainer_module
from modeling.ml.checkpoint import load_checkpoint
from modeling.ml.data import CaptionItem, collate
from modeling.ml.vocab import tokenize
from modeling.models import Suggestion, TrainingRun
from tests.conftest import login
from tests.modeling.captioning import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.modeling.factories import (
    TINY_RUN,
    make_run,
    media_root_fixture,  # noqa: F401 (fixture)
    ready_snapshot,
    scenes_fixture,  # noqa: F401 (fixture)
    snapshot_fixture,  # noqa: F401 (fixture)
    start_tiny_run,
)

pytestmark = pytest.mark.django_db

TINY = ["train.epochs=2", *TINY_RUN]


def _train(project: Project, snapshot: Snapshot, model: str = "tempatt", **kw: Any) -> TrainingRun:
    run = start_tiny_run(project, snapshot, model, kw.pop("overrides", TINY))
    return training.run_execute(run=run, **kw).run


def test_a_run_trains_on_its_snapshot_and_keeps_curve_metrics_and_checkpoint(
    project: Project, snapshot: Snapshot
) -> None:
    run = _train(project, snapshot)

    assert run.state == TrainingRun.State.SUCCEEDED, run.error
    assert run.stopped == "completed"
    assert any("loss" in row for row in run.learning_curve)
    assert any("score" in row for row in run.learning_curve)  # a validation per epoch
    assert len(run.history) == 2
    for split in ("val", "test"):
        assert isinstance(run.metrics[split]["CIDEr-D"], float)
        assert isinstance(run.metrics[split]["BLEU-4"], float)
        assert run.metrics[split]["SPICE"] is None  # no CoreNLP here: unavailable, never 0
    assert "SPICE" in run.metrics_unavailable
    assert run.device.startswith("cpu")
    assert run.duration_seconds is not None
    assert run.duration_seconds > 0
    checkpoint = load_checkpoint(run.checkpoint.path)  # rebuilds from the file alone
    assert checkpoint.model_name == "tempatt"
    assert checkpoint.feature_config is not None
    assert checkpoint.feature_config["n_mels"] == 16
    a_training_caption = datasets.snapshot_splits(snapshot)["train"].clips[0].texts[0]
    assert set(tokenize(a_training_caption)) <= set(checkpoint.vocab.words)


def test_a_run_scores_and_suggests_with_its_recipes_beam(
    project: Project, snapshot: Snapshot, scenes: Subset, monkeypatch: pytest.MonkeyPatch
) -> None:
    beams: list[int] = []
    scored = training.score_split

    def recording(*args: Any, **kwargs: Any) -> Any:
        beams.append(kwargs.get("beam_size", 1))
        return scored(*args, **kwargs)

    monkeypatch.setattr(training, "score_split", recording)
    run = _train(project, snapshot, overrides=[*TINY, "decoding.beam_size=2"])

    assert run.state == TrainingRun.State.SUCCEEDED, run.error
    assert beams == [1, 1, 2, 2]  # greedy validations per epoch, then val and test
    assert suggestions.clips_caption(run=run, subset=scenes)["beam_size"] == 2
    assert set(Suggestion.objects.values_list("beam_size", flat=True)) == {2}


def test_the_model_reads_the_features_it_is_given(project: Project, snapshot: Snapshot) -> None:
    run = start_tiny_run(project, snapshot, "lstm", ["features.n_mels=24"])
    assert run.config["run"]["model"]["feature_dim"] == 24
    assert run.config["features"]["n_mels"] == 24


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.epochz=3", "unknown config key 'train.epochz'"),
        ("train.epochs=many", "train.epochs"),
        ("features.kind=wavelet", "kind 'wavelet' is not one of"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(
    project: Project, snapshot: Snapshot, override: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        services.run_start(
            project=project,
            model_name="lstm",
            snapshot=snapshot,
            created_by=None,
            overrides=[override],
            enqueue=False,
        )
    assert not TrainingRun.objects.exists()


def test_an_unknown_model_is_refused_listing_the_known_ones(
    project: Project, snapshot: Snapshot
) -> None:
    with pytest.raises(ValidationError, match=r"unknown model 'gpt'.*lstm"):
        services.run_start(
            project=project, model_name="gpt", snapshot=snapshot, created_by=None, enqueue=False
        )


def test_a_snapshot_that_is_not_jsonl_cannot_be_trained_on(
    project: Project, scenes: Subset
) -> None:
    csv = snapshot_build(
        snapshot=snapshot_create(project=project, fmt="clotho", text="raw", splits=["train"])
    )
    with pytest.raises(ValidationError, match="training needs a JSON-lines snapshot"):
        services.run_start(
            project=project, model_name="lstm", snapshot=csv, created_by=None, enqueue=False
        )


def test_a_cancelled_run_keeps_its_checkpoint_and_resumes(
    project: Project, snapshot: Snapshot
) -> None:
    run = start_tiny_run(project, snapshot, "lstm", [*TINY, "train.epochs=3"])
    job = Job.objects.create(kind="training_run", label="t", params={"run_id": run.pk})
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)

    cancelled = training.run_execute(run=run, job=job).run

    assert cancelled.state == TrainingRun.State.CANCELLED
    assert cancelled.checkpoint
    assert cancelled.steps < 3 * 5
    resumed = services.run_resume(run=cancelled, user=None)
    assert resumed.state == TrainingRun.State.QUEUED
    finished = training.run_execute(run=resumed, resume=True).run
    assert finished.state == TrainingRun.State.SUCCEEDED, finished.error
    assert [row["epoch"] for row in finished.history] == [1, 2, 3]  # three in all, not more


def test_a_new_run_from_a_succeeded_runs_checkpoint_trains_from_its_weights(
    project: Project, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _train(project, snapshot, "lstm", overrides=[*TINY_RUN, "train.epochs=1"])
    assert source.state == TrainingRun.State.SUCCEEDED, source.error
    source_file = Path(source.checkpoint.path).read_bytes()
    started_with: list[bytes] = []
    load = trainer_module._load_start_weights

    def spy(model: Any, path: Path, **kwargs: Any) -> None:
        started_with.append(Path(path).read_bytes())
        load(model, path, **kwargs)

    monkeypatch.setattr(trainer_module, "_load_start_weights", spy)

    new = services.run_start_from(run=source, created_by=None, epochs=2)
    finished = training.run_execute(run=new).run

    assert finished.state == TrainingRun.State.SUCCEEDED, finished.error
    assert started_with == [source_file]  # the source's checkpoint, once
    assert [row["epoch"] for row in finished.history] == [1, 2]  # its own epochs, afresh
    source.refresh_from_db()
    assert Path(source.checkpoint.path).read_bytes() == source_file  # left as it was
    assert finished.checkpoint.name != source.checkpoint.name


def test_a_start_checkpoint_of_another_vocabulary_is_refused(
    project: Project, snapshot: Snapshot
) -> None:
    source = _train(project, snapshot, "lstm", overrides=[*TINY_RUN, "train.epochs=1"])
    new = services.run_start_from(run=source, created_by=None)
    config = new.config
    config["run"]["vocab"]["min_count"] = 3  # the rarer words drop out
    TrainingRun.objects.filter(pk=new.pk).update(config=config)
    new.refresh_from_db()

    with pytest.raises(ValueError, match="vocabulary differs"):
        training.run_execute(run=new)

    new.refresh_from_db()
    assert new.state == TrainingRun.State.FAILED
    assert "the checkpoint's vocabulary differs from this run's" in new.error


def test_a_failing_run_keeps_the_reason(project: Project, snapshot: Snapshot) -> None:
    run = start_tiny_run(project, snapshot, "lstm", [*TINY, "train.device=cuda:7"])
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the failure needs a missing device")

    with pytest.raises(ValueError, match="CUDA is not available"):
        training.run_execute(run=run)

    run.refresh_from_db()
    assert run.state == TrainingRun.State.FAILED
    assert "CUDA is not available" in run.error


def _teacher_forced(run: TrainingRun, clip: Clip, text: str) -> tuple[float, float]:
    """(sum of the log-probabilities of `text`'s words and of the <eos> that ended it, mean
    entropy of the predictive distributions they were chosen from) under the run's model,
    teacher-forced. A caption of the vocabulary's longest length was cut there: no <eos>."""
    checkpoint = load_checkpoint(run.checkpoint.path)
    model, vocab = checkpoint.model.eval(), checkpoint.vocab
    _, feature_config = datasets.run_configs(run)
    with datasets.local_file(clip.audio.name) as path:
        features = datasets.feature_cache(feature_config).get_or_compute(path, clip.content_sha256)
    tokens = vocab.encode(text)  # <bos> words <eos>
    emitted = len(tokens) - 1 if len(tokens) - 2 < vocab.max_length else len(tokens) - 2
    with torch.no_grad():
        logits = model(collate([CaptionItem(features=features, tokens=tokens)]))[0]
    # position i predicts token i + 1; a later input never changes an earlier position
    steps = torch.log_softmax(logits.float(), dim=-1)[:emitted]
    chosen = steps.gather(1, torch.tensor(tokens[1 : emitted + 1])[:, None])
    entropies = -(steps.exp() * steps).sum(dim=-1)
    return float(chosen.sum()), float(entropies.mean())


def test_a_finished_run_suggests_captions_with_scores(
    project: Project, snapshot: Snapshot, scenes: Subset
) -> None:
    run = _train(project, snapshot)

    result = suggestions.clips_caption(run=run, subset=scenes, beam_size=3)

    assert result["suggestions"] == scenes.clips.count() == 12
    for suggestion in Suggestion.objects.filter(run=run).select_related("clip"):
        assert suggestion.text
        assert 1 <= len(suggestion.hypotheses) <= 3
        scores = [h["score"] for h in suggestion.hypotheses]
        assert scores == sorted(scores, reverse=True)
        # the caption's log-probability and mean entropy, recomputed teacher-forced
        log_prob, entropy = _teacher_forced(run, suggestion.clip, suggestion.text)
        assert suggestion.log_prob == pytest.approx(log_prob, abs=1e-4)
        assert suggestion.mean_entropy == pytest.approx(entropy, abs=1e-4)
        assert entropy > 0
    suggestions.clips_caption(run=run, subset=scenes, beam_size=1)  # again: replaced, not added
    assert Suggestion.objects.filter(run=run).count() == 12
    assert set(Suggestion.objects.values_list("beam_size", flat=True)) == {1}


def test_a_runs_checkpoint_is_scored_again_on_a_snapshots_validation_split(
    project: Project, snapshot: Snapshot
) -> None:
    # topdown: the attribute words of the scored clips come from the run's training split
    run = _train(project, snapshot, "topdown")

    scored = scoring.run_score_snapshot(run=run, snapshot=snapshot)

    assert scored.scores["CIDEr-D"] == pytest.approx(run.metrics["val"]["CIDEr-D"])


def test_a_run_execute_reports_what_its_data_left_out(project: Project, snapshot: Snapshot) -> None:
    run = start_tiny_run(project, snapshot, "lstm", TINY)
    # a clip whose audio is not fetched (yet) has no content hash
    Clip.objects.filter(pk=Clip.objects.order_by("pk").values("pk")[:1]).update(content_sha256="")

    outcome = training.run_execute(run=run)

    assert outcome.run.state == TrainingRun.State.SUCCEEDED
    assert sum(outcome.dropped_clips.values()) == 1
    assert outcome.video_counts == {}


def test_a_run_trains_without_clips_whose_audio_broke_and_says_so(
    project: Project, snapshot: Snapshot
) -> None:
    run = start_tiny_run(project, snapshot, "lstm", TINY)
    train = datasets.snapshot_splits(snapshot)["train"].clips
    emptied, noisy = (Clip.objects.get(pk=c.clip_id) for c in train[:2])
    Path(emptied.audio.path).write_bytes(b"")
    Path(noisy.audio.path).write_bytes(bytes(range(256)) * 64)

    outcome = training.run_execute(run=run)

    assert outcome.run.state == TrainingRun.State.SUCCEEDED, outcome.run.error
    expected = [
        f"Clip {emptied.pk} (train) left out: its audio file {emptied.audio.name} is empty "
        "(0 bytes).",
        f"Clip {noisy.pk} (train) left out: its audio file {noisy.audio.name} is not readable "
        "audio (Format not recognised.).",
    ]
    assert outcome.warnings == expected
    run.refresh_from_db()
    assert run.warnings == expected
    for clip in (emptied, noisy):  # out of the claim pool too
        clip.refresh_from_db()
        assert clip.status == Clip.Status.FAILED
        assert clip.media_broken_at is not None


def test_the_run_page_shows_the_runs_warnings(
    project: Project, snapshot: Snapshot, alice: Any
) -> None:
    run = start_tiny_run(project, snapshot, "lstm", TINY)
    TrainingRun.objects.filter(pk=run.pk).update(
        warnings=["Clip 7 (train) left out: its audio file clips/audio/x.wav is empty (0 bytes)."]
    )

    page = login(alice).get(run.get_absolute_url()).content.decode()

    assert "Trained without 1 clip:" in page
    assert "Clip 7 (train) left out: its audio file clips/audio/x.wav is empty (0 bytes)." in page


def test_promoting_a_run_demotes_the_previous_one(project: Project, snapshot: Snapshot) -> None:
    first = _train(project, snapshot)
    second = TrainingRun.objects.create(  # another finished run of the same project
        project=project,
        model_name=first.model_name,
        config=first.config,
        snapshot=snapshot,
        state=TrainingRun.State.SUCCEEDED,
        checkpoint=first.checkpoint.name,
    )

    for run in (first, second):  # a run switches once its suggestions exist
        Suggestion.objects.bulk_create(
            Suggestion(run=run, clip=clip, text="a sound", log_prob=-1.0, mean_entropy=0.1,
                       beam_size=1)
            for clip in services.clips_unsuggested(run=run)
        )  # fmt: skip

    assert services.run_promote(run=first).switched
    assert services.run_promote(run=second).switched

    first.refresh_from_db()
    assert first.promoted_at is None
    assert second.promoted_at is not None


def test_the_train_command_runs_and_reports(project: Project, snapshot: Snapshot) -> None:
    args = ["--model", "lstm", "--snapshot", str(snapshot.pk), "--preset", "tiny"]
    for item in TINY:
        args += ["--set", item]
    call_command("train", *args)

    run = TrainingRun.objects.get()
    assert run.state == TrainingRun.State.SUCCEEDED
    assert run.overrides == TINY


def test_the_train_run_command_will_not_resume_a_succeeded_run(project: Project) -> None:
    run = make_run(project, ready_snapshot(project))

    with pytest.raises(CommandError, match=f"Run #{run.pk} succeeded; a finished run does not"):
        call_command("train_run", str(run.pk), "--resume")

    run.refresh_from_db()
    assert run.state == TrainingRun.State.SUCCEEDED


def test_the_train_commands_help_lists_every_models_recipe() -> None:
    from modeling.management.commands.train import Command

    text = Command().create_parser("manage.py", "train").format_help()

    assert "--epochs N" in text
    for line in (
        "act: Liu et al., Interspeech 2023 (ACT). captions 15 epochs at 1e-4 (5 warm-up).",
        "maac: Ye et al., DCASE 2021 (MAAC). pre-training 80 epochs at 1e-3 with the backbone",
        "crossmodal: Shen et al., CVPR 2023 (audio-visual captioner, MBP). pre-training 20",
    ):
        assert line in text


def test_the_train_command_names_an_unknown_snapshot(db: None) -> None:
    with pytest.raises(CommandError, match="No snapshot with id 999"):
        call_command("train", "--model", "lstm", "--snapshot", "999")


def test_the_train_command_switches_on_spec_augment_and_a_pretrained_encoder(
    project: Project, snapshot: Snapshot, tmp_path: Path, settings: Any
) -> None:
    from modeling.ml.encoders import pretrained_architecture

    settings.ENCODER_WEIGHTS_DIR = tmp_path
    options = '{"channels": [4, 4, 8, 8, 8, 8], "hidden": 16, "embedding_dim": 8}'
    weights = tmp_path / "vggish.pt"
    torch.save(pretrained_architecture("vggish", 16, json.loads(options)).state_dict(), weights)
    settings = [
        "train.epochs=1",
        "train.batch_size=4",
        "features.n_mels=16",
        "train.spec_augment=true",
        "model.encoder=vggish",
        f"model.encoder_weights={weights}",
        f"model.encoder_options={options}",
    ]
    args = ["--model", "lstm", "--snapshot", str(snapshot.pk), "--preset", "tiny"]
    for item in settings:
        args += ["--set", item]
    call_command("train", *args)

    run = TrainingRun.objects.get()
    assert run.state == TrainingRun.State.SUCCEEDED, run.error
    assert run.config["features"]["sample_rate"] == 16_000  # VGGish's own front end
    checkpoint = load_checkpoint(run.checkpoint.path)
    assert checkpoint.model.config.encoder == "vggish"
    assert checkpoint.run_config is not None
    assert checkpoint.run_config["train"]["spec_augment"] is True


def test_a_missing_encoder_weights_file_is_named_before_the_run_starts(
    project: Project, snapshot: Snapshot, tmp_path: Path, settings: Any
) -> None:
    settings.ENCODER_WEIGHTS_DIR = tmp_path
    missing = tmp_path / "nowhere" / "cnn14.pth"
    with pytest.raises(ValidationError, match=f"no such file {missing}"):
        services.run_start(
            project=project,
            model_name="lstm",
            snapshot=snapshot,
            created_by=None,
            overrides=["model.encoder=panns", f"model.encoder_weights={missing}"],
            enqueue=False,
        )
    assert not TrainingRun.objects.exists()


@pytest.fixture
def weights_dir(settings: Any, tmp_path: Path) -> Path:
    settings.ENCODER_WEIGHTS_DIR = tmp_path / "weights"
    (tmp_path / "weights" / "panns").mkdir(parents=True)
    (tmp_path / "weights" / "panns" / "cnn14.pth").write_bytes(b"weights")
    return tmp_path / "weights"


def test_encoder_weights_are_named_relative_to_the_weights_folder(weights_dir: Path) -> None:
    named = planning.weights_file("panns/cnn14.pth", option="model.encoder_weights")

    assert named == str(weights_dir / "panns" / "cnn14.pth")
    assert planning.weights_file(named, option="model.encoder_weights") == named


@pytest.mark.parametrize(
    "outside",
    [
        "/etc/passwd",  # exists
        "/etc/no-such-file-here",  # does not
        "../secret.pth",
        "panns/../../secret.pth",
        "link.pth",  # a link in the folder to a file outside it
    ],
)
def test_a_weights_path_outside_the_folder_is_refused_without_saying_if_it_exists(
    weights_dir: Path, outside: str
) -> None:
    (weights_dir.parent / "secret.pth").write_bytes(b"secret")
    (weights_dir / "link.pth").symlink_to(weights_dir.parent / "secret.pth")

    with pytest.raises(ValidationError) as refused:
        planning.weights_file(outside, option="model.encoder_weights")

    assert refused.value.messages == [
        f"model.encoder_weights: {outside} is not in the encoder weights folder "
        "(ENCODER_WEIGHTS_DIR on the machine that trains); name a file there, "
        "e.g. panns/cnn14.pth."
    ]


def test_a_run_naming_video_weights_outside_the_folder_is_refused(weights_dir: Path) -> None:
    with pytest.raises(ValidationError, match=r"video\.weights: /etc/passwd is not in"):
        planning.run_spec(
            model_name="vact_video",
            overrides=["video.encoder=resnet18", "video.weights=/etc/passwd"],
        )


def test_a_run_records_the_full_path_of_the_weights_it_names(weights_dir: Path) -> None:
    spec = planning.run_spec(
        model_name="lstm",
        overrides=["model.encoder=panns", "model.encoder_weights=panns/cnn14.pth"],
    )

    assert spec["run"]["model"]["encoder_weights"] == str(weights_dir / "panns" / "cnn14.pth")


def test_a_worker_with_several_processes_trains_through_torchrun(
    project: Project, snapshot: Snapshot, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.services import Progress, job_create

    settings.TRAIN_NPROC = 2
    run = start_tiny_run(project, snapshot, "lstm", TINY)
    job = job_create(kind="training_run", params={"run_id": run.pk})
    launched: list[list[str]] = []
    environments: list[dict[str, str]] = []
    real_run = subprocess.run

    def torchrun(command: list[str], **kwargs: Any) -> Any:
        # stands in for torchrun: rank 0 of the command it was given, in this process
        if "torch.distributed.run" not in command:
            return real_run(command, **kwargs)  # the evaluation's tokenizer
        launched.append(command)
        environments.append(kwargs["env"])
        work = Path(command[command.index("--work-dir") + 1])
        assert work.is_dir()
        call_command(*command[command.index("train_run") :])
        return subprocess.CompletedProcess(command, 0, stdout=b"")

    monkeypatch.setattr(training.subprocess, "run", torchrun)
    result = training.run_execute_job(job=job, progress=Progress(job), run_id=run.pk)

    (command,) = launched
    assert command[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    # the ranks start through `python -m django` (an installed copy has no manage.py) with
    # this process's settings module and state folder
    assert command[5:8] == ["--module", "django", "train_run"]
    assert not any(part.endswith("manage.py") for part in command)
    (environment,) = environments
    assert environment["DJANGO_SETTINGS_MODULE"] == os.environ["DJANGO_SETTINGS_MODULE"]
    assert environment["EARMARK_VAR_DIR"] == str(settings.VAR_DIR)
    assert command[command.index("train_run") + 1 :][:3] == [str(run.pk), "--job", str(job.pk)]
    assert not Path(command[command.index("--work-dir") + 1]).exists()  # removed afterwards
    assert result["state"] == TrainingRun.State.SUCCEEDED
    run.refresh_from_db()
    job.refresh_from_db()
    assert run.checkpoint
    assert any("loss" in row for row in run.learning_curve)  # rank 0 kept the curve
    assert job.progress_done > 0  # and the job's progress


def test_a_torchrun_that_dies_fails_the_run_with_its_output(
    project: Project, snapshot: Snapshot, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.services import Progress, job_create

    settings.TRAIN_NPROC = 2
    run = start_tiny_run(project, snapshot, "lstm", TINY)
    job = job_create(kind="training_run", params={"run_id": run.pk})
    real_run = subprocess.run

    def killed(command: list[str], **kwargs: Any) -> Any:
        if "torch.distributed.run" not in command:
            return real_run(command, **kwargs)
        return subprocess.CompletedProcess(command, -9, stdout=b"rank 1: Killed")

    monkeypatch.setattr(training.subprocess, "run", killed)
    with pytest.raises(RuntimeError, match="torchrun exited with status -9"):
        training.run_execute_job(job=job, progress=Progress(job), run_id=run.pk)
    run.refresh_from_db()
    assert run.state == TrainingRun.State.FAILED
    assert "rank 1: Killed" in run.error


def test_training_processes_follow_the_setting(settings: Any) -> None:
    settings.TRAIN_NPROC = 3
    assert training.training_processes() == 3
    settings.TRAIN_NPROC = 0
    expected = torch.cuda.device_count() if torch.cuda.is_available() else 1
    assert training.training_processes() == max(1, expected)
