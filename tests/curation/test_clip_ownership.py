"""A project's clips are its own: another project that uploads a copy of the same audio
gets a clip of its own and reaches nothing of the first project's (issue 19, finding 3)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Caption
from core.models import Job, Project, Role
from core.services import job_run, membership_add
from corpus.queries import approved_captions
from crowd.services import qualification_create
from curation import synth
from curation.models import Clip, Label, Split, Subset
from curation.services import ontology_import, subset_from_clips
from postprocessing.models import ProcessedCaption
from tests.conftest import ONTOLOGY_EXCERPT, login, make_user

pytestmark = pytest.mark.django_db

SIREN = "/m/03kmc9"


def _wav_bytes(seed: int) -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, synth.siren(np.random.default_rng(seed), 16_000, 1.0), 16_000, format="WAV")
    return buffer.getvalue()


AUDIO = _wav_bytes(1)


def _import_archive(user: Any, project: Project, member: str, subset_name: str) -> Subset:
    """The page's way in: a researcher uploads an archive, a media worker imports it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr(member, AUDIO)
    upload = SimpleUploadedFile("upload.zip", buffer.getvalue(), content_type="application/zip")
    login(user).post(
        reverse("clip_import", args=[project.slug]), {"archive": upload, "subset_name": subset_name}
    )
    job = job_run(job_id=Job.objects.filter(project=project).latest("pk").pk)
    assert job.state == Job.State.SUCCEEDED, job.error
    return Subset.objects.get(project=project, slug=job.result["subset"])


@pytest.fixture
def sounds_clip(project: Project, alice: Any, settings: Any, tmp_path: Path) -> Clip:
    """Alice's recording in "sounds", with what only her project should know: its file
    name, a label, a video hint and a caption imported into the project."""
    settings.MEDIA_ROOT = tmp_path / "media"
    ontology_import(path=ONTOLOGY_EXCERPT)
    subset = _import_archive(alice, project, "private-interview-042.wav", "Interviews")
    clip = subset.clips.get()
    clip.labels.add(Label.objects.get(mid=SIREN))
    clip.video.save("hint.mp4", ContentFile(b"sounds' video hint"))
    Caption.objects.create(
        provenance=Caption.Provenance.IMPORTED,
        imported_into=project,
        clip=clip,
        text="Dr. Smith discusses the patient",
        external_id="interview-042#1",
    )
    return clip


@pytest.fixture
def birds(olive: Any) -> Project:
    project = Project.objects.get(slug="birds")
    membership_add(project=project, user=make_user("reuben"), role=Role.REVIEWER)
    return project


@pytest.fixture
def birds_subset(sounds_clip: Clip, birds: Project, olive: Any) -> Subset:
    """Olive uploads a copy of the same audio into "birds"."""
    return _import_archive(olive, birds, "copy.wav", "Copies")


def test_the_same_audio_uploaded_to_another_project_becomes_a_clip_of_its_own(
    sounds_clip: Clip, birds_subset: Subset, birds: Project
) -> None:
    theirs = birds_subset.clips.get()

    assert theirs.pk != sounds_clip.pk
    assert theirs.content_sha256 == sounds_clip.content_sha256
    assert (theirs.project, theirs.original_name) == (birds, "copy.wav")
    assert not theirs.labels.exists()
    assert not theirs.video
    assert not Caption.objects.filter(clip=theirs).exists()


def test_the_other_project_clip_list_shows_nothing_of_the_first(
    sounds_clip: Clip, birds_subset: Subset, olive: Any
) -> None:
    page = login(olive).get(reverse("clip_list", args=["birds"]))

    assert page.status_code == 200
    assert b"copy.wav" in page.content
    assert b"private-interview-042" not in page.content


def test_the_other_project_api_lists_its_own_clip_without_the_first_project_data(
    sounds_clip: Clip, birds_subset: Subset, olive: Any
) -> None:
    answer = login(olive).get(f"/api/projects/birds/subsets/{birds_subset.slug}/clips")

    [clip] = answer.json()["items"]
    assert clip["id"] != sounds_clip.pk
    assert (clip["original_name"], clip["labels"], clip["video_url"]) == ("copy.wav", [], None)


@pytest.mark.parametrize("media", ["clip_audio", "clip_video"])
@pytest.mark.parametrize("member", ["olive", "reuben"])  # birds' researcher and reviewer
def test_the_first_project_media_is_not_found_for_the_other_project_members(
    sounds_clip: Clip, birds_subset: Subset, media: str, member: str, alice: Any
) -> None:
    client = login(User.objects.get(username=member))

    for slug in ("birds", "sounds"):
        url = reverse(media, args=[slug, sounds_clip.pk])
        assert client.get(url).status_code == 404, url
    # its owner still plays it
    assert login(alice).get(reverse(media, args=["sounds", sounds_clip.pk])).status_code == 200


def test_the_other_project_cannot_hand_pick_the_first_project_clip(
    sounds_clip: Clip, birds: Project
) -> None:
    with pytest.raises(ValidationError, match="belong to another project"):
        subset_from_clips(project=birds, name="Stolen", clip_ids=[sounds_clip.pk])
    assert not Subset.objects.filter(project=birds, slug="stolen").exists()


def test_the_other_project_cannot_build_a_qualification_on_the_first_project_clip(
    sounds_clip: Clip, birds_subset: Subset, birds: Project, olive: Any
) -> None:
    with pytest.raises(ValidationError, match="not clips of"):
        qualification_create(
            project=birds, created_by=olive, name="Test", clip_ids=str(sounds_clip.pk)
        )


def test_the_other_project_corpus_and_post_processing_leave_the_first_project_caption_alone(
    sounds_clip: Clip, birds_subset: Subset, birds: Project
) -> None:
    caption = Caption.objects.get(clip=sounds_clip)

    call_command("postprocess_captions", "--project", "birds", stdout=io.StringIO())

    assert not ProcessedCaption.objects.filter(caption=caption).exists()
    assert not any(approved_captions(birds, split).exists() for split in Split.values)
