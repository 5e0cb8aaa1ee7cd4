"""clips_import_local (curation.services.local_import) and the import_local_audio command,
on real ffmpeg."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from core.models import Job, Project
from curation import synth
from curation.models import Clip
from curation.services import (
    ClipMediaBroken,
    clip_audio_check,
    clip_audio_problem,
    clips_import_local,
    ontology_import,
)
from tests.conftest import ONTOLOGY_EXCERPT

pytestmark = pytest.mark.django_db

SIREN, RINGING = "/m/03kmc9", "/m/07pp8cl"
# file name -> (generator, seconds, sample rate written): 44.1 kHz must come out at 32 kHz
SOUNDS: dict[str, tuple[synth.Generator, float, int]] = {
    "siren.wav": (synth.siren, 1.5, 44_100),
    "phone.wav": (synth.telephone_ringing, 2.0, 32_000),
}


def _files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.fixture
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def ontology(db: None) -> None:
    ontology_import(path=ONTOLOGY_EXCERPT)


@pytest.fixture
def sounds(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "src"
    folder.mkdir()
    rng = np.random.default_rng(3)
    paths = {}
    for name, (generate, seconds, rate) in SOUNDS.items():
        synth.write_wav(folder / name, generate(rng, rate, seconds), rate)
        paths[name] = folder / name
    return paths


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "bad.wav"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(np.random.default_rng(5).bytes(4096))
    return path


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "empty.wav"
    path.parent.mkdir(exist_ok=True)
    path.touch()
    return path


def _import(paths: list[Path], project: Project | None = None, **kw: Any) -> dict[str, Any]:
    return clips_import_local(
        project=project, paths=paths, labels={"siren.wav": [SIREN], "phone.wav": [RINGING]}, **kw
    )


def test_it_imports_good_files_as_ready_clips(
    media_root: Path, ontology: None, sounds: dict[str, Path]
) -> None:
    result = _import(list(sounds.values()))
    clips = Clip.objects.all()
    assert result == {
        "files": 2,
        "created": 2,
        "already_present": 0,
        "restored": 0,
        "broken": [],
        "clip_ids": sorted(clip.pk for clip in clips),
    }
    assert {c.original_name for c in clips} == set(SOUNDS)
    for clip in clips:
        assert clip.source == Clip.Source.LOCAL
        assert clip.status == Clip.Status.READY
        assert len(clip.content_sha256) == 64


def test_it_records_duration_and_the_32k_sample_rate(
    media_root: Path, ontology: None, sounds: dict[str, Path]
) -> None:
    _import(list(sounds.values()))
    for clip in Clip.objects.all():
        seconds = SOUNDS[clip.original_name][1]
        assert clip.sample_rate == 32_000
        assert clip.duration_seconds == pytest.approx(seconds, abs=0.05)
        assert float(clip.end_seconds) == pytest.approx(seconds, abs=0.05)


def test_it_stores_audio_at_the_sample_rate_it_is_given(
    media_root: Path, ontology: None, sounds: dict[str, Path]
) -> None:
    _import(list(sounds.values()), sample_rate=22_050)
    for clip in Clip.objects.all():
        assert clip.sample_rate == 22_050
        assert sf.info(clip.audio.path).samplerate == 22_050


def test_it_computes_waveform_peaks_between_0_and_1(
    media_root: Path, ontology: None, sounds: dict[str, Path]
) -> None:
    _import(list(sounds.values()))
    for clip in Clip.objects.all():
        source, _ = sf.read(str(sounds[clip.original_name]), dtype="float32")
        assert 0 < len(clip.peaks) <= 400
        assert all(0.0 <= p <= 1.0 for p in clip.peaks)
        assert max(clip.peaks) == pytest.approx(float(np.abs(source).max()), abs=0.02)


def test_it_stores_mono_32k_audio_under_media_root(
    media_root: Path, ontology: None, sounds: dict[str, Path]
) -> None:
    _import(list(sounds.values()))
    for clip in Clip.objects.all():
        stored = Path(clip.audio.path)
        assert stored.is_relative_to(media_root)
        info = sf.info(str(stored))
        assert (info.samplerate, info.channels) == (32_000, 1)
        assert info.duration == pytest.approx(clip.duration_seconds, abs=0.05)
    assert len(_files_under(media_root)) == 2


def test_it_attaches_the_labels_given_per_file(
    media_root: Path, ontology: None, sounds: dict[str, Path]
) -> None:
    _import(list(sounds.values()))
    assert [lb.mid for lb in Clip.objects.get(original_name="siren.wav").labels.all()] == [SIREN]
    assert [lb.mid for lb in Clip.objects.get(original_name="phone.wav").labels.all()] == [RINGING]


def test_it_skips_audio_already_imported(
    media_root: Path, ontology: None, sounds: dict[str, Path], tmp_path: Path
) -> None:
    _import(list(sounds.values()))
    copy = tmp_path / "siren_copy.wav"
    copy.write_bytes(sounds["siren.wav"].read_bytes())

    result = _import([*sounds.values(), copy])

    assert result["created"] == 0
    assert result["already_present"] == 3
    assert Clip.objects.count() == 2
    assert len(_files_under(media_root)) == 2


def test_it_skips_audio_the_project_already_has(
    media_root: Path, ontology: None, sounds: dict[str, Path], project: Project
) -> None:
    first = _import(list(sounds.values()), project=project)

    again = _import(list(sounds.values()), project=project)

    assert (again["created"], again["already_present"]) == (0, 2)
    assert again["clip_ids"] == first["clip_ids"]
    assert set(Clip.objects.values_list("project", flat=True)) == {project.pk}


def test_importing_the_same_file_again_restores_a_clip_whose_stored_audio_broke(
    media_root: Path,
    ontology: None,
    sounds: dict[str, Path],
    project: Project,
    django_capture_on_commit_callbacks: Any,
) -> None:
    first = _import(list(sounds.values()), project=project)
    clip = Clip.objects.get(original_name="siren.wav")
    broken = Path(clip.audio.path)
    broken.write_bytes(b"")
    with pytest.raises(ClipMediaBroken):
        clip_audio_check(clip=clip)

    with django_capture_on_commit_callbacks(execute=True):
        again = _import(list(sounds.values()), project=project)

    assert (again["created"], again["already_present"], again["restored"]) == (0, 1, 1)
    assert again["clip_ids"] == first["clip_ids"]
    clip.refresh_from_db()
    assert (clip.status, clip.error, clip.media_broken_at) == (Clip.Status.READY, "", None)
    assert [lb.mid for lb in clip.labels.all()] == [SIREN]  # the same clip, labels kept
    assert sf.info(clip.audio.path).duration == pytest.approx(1.5, abs=0.01)
    assert not broken.exists()
    assert clip_audio_problem(clip) is None


def test_another_project_importing_the_same_audio_gets_a_clip_of_its_own(
    media_root: Path,
    ontology: None,
    sounds: dict[str, Path],
    project: Project,
    olive: Any,
    tmp_path: Path,
) -> None:
    video = tmp_path / "hint.mp4"
    video.write_bytes(b"project sounds' own video hint")
    clips_import_local(
        project=project,
        paths=[sounds["siren.wav"]],
        labels={"siren.wav": [SIREN]},
        videos={"siren.wav": video},
    )
    birds = Project.objects.get(slug="birds")
    copy = tmp_path / "upload.wav"
    copy.write_bytes(sounds["siren.wav"].read_bytes())

    result = clips_import_local(project=birds, paths=[copy])

    assert (result["created"], result["already_present"]) == (1, 0)
    theirs = Clip.objects.get(pk=result["clip_ids"][0])
    ours = Clip.objects.get(project=project)
    assert theirs.pk != ours.pk
    assert theirs.project == birds
    assert theirs.content_sha256 == ours.content_sha256
    assert theirs.original_name == "upload.wav"
    assert not theirs.labels.exists()
    assert not theirs.video
    assert theirs.audio.name != ours.audio.name
    assert ours.original_name == "siren.wav"


@pytest.mark.parametrize("broken", ["bad", "empty"])
def test_it_stores_nothing_when_one_file_is_broken(
    media_root: Path,
    ontology: None,
    sounds: dict[str, Path],
    broken: str,
    request: pytest.FixtureRequest,
) -> None:
    broken_path: Path = request.getfixturevalue(broken)
    with pytest.raises(ValidationError) as raised:
        _import([sounds["siren.wav"], broken_path, sounds["phone.wav"]])
    message = "; ".join(raised.value.messages)
    assert broken_path.name in message
    assert "siren.wav" not in message
    assert not Clip.objects.exists()
    assert _files_under(media_root) == []


def test_it_imports_the_rest_and_names_the_broken_with_skip_broken(
    media_root: Path, ontology: None, sounds: dict[str, Path], bad: Path
) -> None:
    result = _import([sounds["siren.wav"], bad, sounds["phone.wav"]], skip_broken=True)
    assert result["created"] == 2
    assert len(result["broken"]) == 1
    assert "bad.wav" in result["broken"][0]
    assert set(Clip.objects.values_list("original_name", flat=True)) == set(SOUNDS)


def test_it_rejects_an_unknown_label_id_before_importing(
    media_root: Path, ontology: None, sounds: dict[str, Path]
) -> None:
    with pytest.raises(ValidationError, match="/m/not-a-label"):
        clips_import_local(
            project=None,
            paths=[sounds["siren.wav"]],
            labels={"siren.wav": [SIREN, "/m/not-a-label"]},
        )
    assert not Clip.objects.exists()
    assert _files_under(media_root) == []


def test_it_imports_a_folder_through_the_management_command(
    media_root: Path, ontology: None, sounds: dict[str, Path]
) -> None:
    folder = sounds["siren.wav"].parent
    (folder / "notes.txt").write_text("not audio")

    out = io.StringIO()

    call_command("import_local_audio", str(folder), "--label", SIREN, stdout=out)

    assert "succeeded" in out.getvalue()

    job = Job.objects.get(kind="clips_import_local")
    assert job.state == Job.State.SUCCEEDED
    assert job.result["created"] == 2
    assert job.progress_done == job.progress_total
    clips = Clip.objects.filter(status=Clip.Status.READY)
    assert set(clips.values_list("original_name", flat=True)) == set(SOUNDS)
    assert all([lb.mid for lb in c.labels.all()] == [SIREN] for c in clips)


def test_it_fails_the_command_job_naming_a_broken_file(
    media_root: Path, ontology: None, sounds: dict[str, Path], bad: Path
) -> None:
    with pytest.raises(CommandError, match=r"bad\.wav"):
        call_command("import_local_audio", str(bad.parent), stdout=io.StringIO())

    job = Job.objects.get(kind="clips_import_local")
    assert job.state == Job.State.FAILED
    assert "bad.wav" in job.error
    assert not Clip.objects.exists()


def test_the_command_imports_clips_owned_by_the_project_it_names(
    media_root: Path, ontology: None, sounds: dict[str, Path], project: Project
) -> None:
    project.audio_sample_rate = 16_000
    project.save()

    call_command(
        "import_local_audio", str(sounds["siren.wav"]), "--project", "sounds", stdout=io.StringIO()
    )

    clip = Clip.objects.get()
    assert clip.project == project
    assert clip.sample_rate == 16_000  # the project's rate, not the command's default
    assert Job.objects.get(kind="clips_import_local").project == project


def test_the_command_refuses_a_project_that_does_not_exist(
    media_root: Path, ontology: None, sounds: dict[str, Path]
) -> None:
    with pytest.raises(CommandError, match="No project 'nope'"):
        call_command("import_local_audio", str(sounds["siren.wav"]), "--project", "nope")
    assert not Clip.objects.exists()


def test_it_refuses_a_file_whose_name_holds_a_line_break(project: Project, tmp_path: Path) -> None:
    path = tmp_path / "rain\nffff  evil.wav"
    sf.write(path, np.zeros(800, dtype=np.int16), 8000)
    with pytest.raises(ValidationError) as refused:
        clips_import_local(project=project, paths=[path])
    assert (
        "'rain\\nffff  evil.wav': the file name holds a control character (U+000A)"
        in (refused.value.messages[0])
    )
    assert not Clip.objects.exists()
