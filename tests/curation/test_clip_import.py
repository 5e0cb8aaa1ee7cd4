"""Researchers upload an archive of audio files from the clips page; a job imports it."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from core.models import Job, Project
from core.services import job_run
from curation import synth
from curation.models import Clip, Label, Subset, SuperCategory, WordLabel
from tests.conftest import login
from tests.curation import hostile_media


@pytest.fixture
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def _wav_bytes(seconds: float, rate: int = 44_100, seed: int = 0) -> bytes:
    buffer = io.BytesIO()
    samples = synth.siren(np.random.default_rng(seed), rate, seconds)
    sf.write(buffer, samples, rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def _archive(members: dict[str, bytes], name: str = "field-recordings.zip") -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for member, data in members.items():
            zipped.writestr(member, data)
    return SimpleUploadedFile(name, buffer.getvalue(), content_type="application/zip")


GOOD = {"walk/steps.wav": _wav_bytes(1.0, seed=1), "kettle.wav": _wav_bytes(1.5, seed=2)}


def _upload(client: Any, project: Project, archive: Any, subset_name: str = "") -> Any:
    return client.post(
        reverse("clip_import", args=[project.slug]),
        {"archive": archive, "subset_name": subset_name},
    )


def test_the_researcher_uploads_an_archive_and_a_job_imports_it(
    project: Project, alice: Any, media_root: Path
) -> None:
    project.audio_sample_rate = 16_000
    project.save()
    archive = _archive({**GOOD, "notes.txt": b"mic: zoom h4n", "broken.wav": b"RIFF junk"})

    response = _upload(login(alice), project, archive, subset_name="Kitchen walk")

    job = Job.objects.get(kind="clips_import_archive")
    assert response.status_code == 302
    assert response["Location"] == job.get_absolute_url()
    assert (job.project, job.created_by, job.queue) == (project, alice, "media")
    job = job_run(job_id=job.pk)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.result["created"] == 2
    assert len(job.result["broken"]) == 1
    assert "broken.wav" in job.result["broken"][0]
    assert job.result["skipped_members"] == ["notes.txt: not an audio file"]
    clips = Clip.objects.filter(source=Clip.Source.LOCAL)
    assert sorted(clips.values_list("original_name", flat=True)) == ["kettle.wav", "steps.wav"]
    assert set(clips.values_list("sample_rate", flat=True)) == {16_000}
    subset = Subset.objects.get(project=project, slug=job.result["subset"])
    assert subset.name == "Kitchen walk"
    assert set(subset.clips.values_list("pk", flat=True)) == set(clips.values_list("pk", flat=True))


def test_the_uploaded_archive_is_deleted_after_the_import(
    project: Project, alice: Any, media_root: Path
) -> None:
    _upload(login(alice), project, _archive(GOOD))
    job = Job.objects.get(kind="clips_import_archive")
    assert default_storage.exists(job.params["stored_name"])

    job_run(job_id=job.pk)

    assert not default_storage.exists(job.params["stored_name"])


def test_an_archive_without_readable_audio_fails_the_job_saying_why(
    project: Project, alice: Any, media_root: Path
) -> None:
    _upload(login(alice), project, _archive({"a.wav": b"RIFF junk", "b.mp3": b"ID3 junk"}))

    job = job_run(job_id=Job.objects.get(kind="clips_import_archive").pk)

    assert job.state == Job.State.FAILED
    assert "none of its 2 audio file(s) could be read" in job.error
    assert not Clip.objects.exists()


def test_a_file_that_is_not_an_archive_is_refused_at_upload(
    project: Project, alice: Any, media_root: Path
) -> None:
    fake = SimpleUploadedFile("clips.zip", b"MZ\x90\x00 this is a program", "application/zip")

    response = _upload(login(alice), project, fake)

    assert response.status_code == 400
    assert "the name says zip but the content is not a zip archive" in response.content.decode()
    assert not Job.objects.exists()
    assert not (media_root / "uploads").exists()


def test_an_archive_over_the_size_limit_is_refused(
    project: Project, alice: Any, media_root: Path, settings: Any
) -> None:
    settings.ARCHIVE_UPLOAD_MAX_BYTES = 2048

    response = _upload(login(alice), project, _archive(GOOD))

    assert response.status_code == 400
    assert "uploads may be at most" in response.content.decode()
    assert not Job.objects.exists()


def test_a_subset_name_already_taken_fails_before_importing(
    project: Project, alice: Any, media_root: Path
) -> None:
    Subset.objects.create(project=project, name="Kitchen", slug="kitchen")
    _upload(login(alice), project, _archive(GOOD), subset_name="Kitchen")

    job = job_run(job_id=Job.objects.get(kind="clips_import_archive").pk)

    assert job.state == Job.State.FAILED
    assert "already has a subset called 'Kitchen'" in job.error
    assert not Clip.objects.exists()


@pytest.mark.parametrize("who", ["rey", "ann", "olive"])
def test_only_the_projects_researchers_may_import(
    project: Project, media_root: Path, who: str, request: pytest.FixtureRequest
) -> None:
    client = login(request.getfixturevalue(who))

    page = client.get(reverse("clip_import", args=[project.slug]))
    post = _upload(client, project, _archive(GOOD))

    assert page.status_code in (403, 404)
    assert post.status_code in (403, 404)
    assert not Job.objects.exists()


def test_the_clips_page_offers_the_import_to_researchers_only(
    project: Project, alice: Any, rey: Any
) -> None:
    url = reverse("clip_list", args=[project.slug])
    link = reverse("clip_import", args=[project.slug])

    assert link in login(alice).get(url).content.decode()
    assert link not in login(rey).get(url).content.decode()


def test_an_hls_playlist_named_wav_never_brings_a_server_file_into_a_clip(
    project: Project, alice: Any, media_root: Path, tmp_path: Path
) -> None:
    secret = hostile_media.server_secret(tmp_path / "secret.mp3")
    playlist = hostile_media.hls_playlist(tmp_path / "rain.wav", secret).read_bytes()
    _upload(
        login(alice), project, _archive({"rain.wav": playlist, "kettle.wav": GOOD["kettle.wav"]})
    )

    job = job_run(job_id=Job.objects.get(kind="clips_import_archive").pk)

    assert job.state == Job.State.SUCCEEDED, job.error
    assert list(Clip.objects.values_list("original_name", flat=True)) == ["kettle.wav"]
    assert len(job.result["broken"]) == 1
    assert "rain.wav" in job.result["broken"][0]
    assert "a hls file, which Earmark does not read" in job.result["broken"][0]
    assert str(tmp_path) not in job.result["broken"][0]


def test_a_file_longer_than_its_header_claims_is_refused(
    project: Project, alice: Any, media_root: Path, tmp_path: Path
) -> None:
    liar = hostile_media.wav_lying_about_duration(tmp_path / "x.wav", claims=1.0, holds=600.0)
    _upload(login(alice), project, _archive({"short.wav": liar.read_bytes(), **GOOD}))

    job = job_run(job_id=Job.objects.get(kind="clips_import_archive").pk)

    assert job.state == Job.State.SUCCEEDED, job.error
    assert sorted(Clip.objects.values_list("original_name", flat=True)) == [
        "kettle.wav",
        "steps.wav",
    ]
    assert job.result["broken"] == [
        "short.wav: lasts more than 60 s once decoded (its header says 1.0 s); "
        "clips may last at most 60 s"
    ]
    assert all((c.duration_seconds or 0) < 2 for c in Clip.objects.all())


def test_a_zip_bomb_is_refused_at_the_configured_cap(
    project: Project, alice: Any, media_root: Path, settings: Any
) -> None:
    settings.ARCHIVE_UNPACKED_MAX_BYTES = 8 * 1024 * 1024
    settings.ARCHIVE_MAX_EXPANSION_RATIO = 1e6  # the byte cap alone must hold
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("kettle.wav", GOOD["kettle.wav"])
        with zipped.open("bomb.wav", "w") as out:
            for _ in range(64):
                out.write(bytes(1024 * 1024))
    _upload(login(alice), project, SimpleUploadedFile("a.zip", buffer.getvalue()))

    job = job_run(job_id=Job.objects.get(kind="clips_import_archive").pk)

    assert job.state == Job.State.FAILED
    assert "the archive unpacks to more than 8 MB; split it up" in job.error
    assert not Clip.objects.exists()


def test_an_archive_of_unlabelled_clips_becomes_a_subset_with_a_zero_report(
    project: Project, alice: Any, media_root: Path
) -> None:
    # an ontology with a categorised word label, so the report has a category to count
    speech = WordLabel.objects.create(name="speech", super_category=SuperCategory.HUMAN)
    Label.objects.create(mid="/m/09x0r", name="Speech", word_label=speech)
    _upload(login(alice), project, _archive(GOOD), subset_name="Unlabelled")

    job = job_run(job_id=Job.objects.get(kind="clips_import_archive").pk)

    assert job.state == Job.State.SUCCEEDED, job.error
    subset = Subset.objects.get(project=project, slug=job.result["subset"])
    assert subset.clips.count() == 2
    assert subset.report["super_categories"] == {"human": 0}
    assert subset.report["labels"] == []
