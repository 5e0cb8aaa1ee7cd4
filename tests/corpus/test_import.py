from __future__ import annotations

import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from annotation.models import Caption
from core.models import Job, Project
from corpus.models import CorpusImport
from corpus.queries import approved_captions
from corpus.services import captions_import
from curation.models import Clip, Subset, SubsetClip
from tests.corpus.conftest import AUDIOCAPS, CLOTHO


def counts() -> tuple[int, int, int, int]:
    return (
        Clip.objects.count(),
        Caption.objects.count(),
        SubsetClip.objects.count(),
        CorpusImport.objects.count(),
    )


def test_it_creates_clips_and_imported_captions(imported: CorpusImport) -> None:
    clip = Clip.objects.get(youtube_id="CCCCCCCCCCC")

    assert (imported.rows, imported.clips_created, imported.captions_created) == (5, 4, 5)
    assert clip.source == Clip.Source.YOUTUBE
    assert clip.segment_list == Clip.SegmentList.UNBALANCED
    assert (clip.start_seconds, clip.end_seconds) == (Decimal("12.5"), Decimal("22.5"))
    assert clip.status == Clip.Status.PENDING
    caption = Caption.objects.get(external_id="104")
    assert caption.clip == clip
    assert caption.provenance == Caption.Provenance.IMPORTED
    assert caption.assignment is None
    assert caption.text == 'An engine idles and a horn says "beep"'


def test_it_puts_the_clips_into_the_import_subset_with_the_split(
    imported: CorpusImport, project: Project
) -> None:
    subset = Subset.objects.get(project=project, slug="audiocaps")

    assert imported.subset == subset
    assert set(SubsetClip.objects.filter(subset=subset).values_list("split", flat=True)) == {
        "train"
    }
    assert SubsetClip.objects.filter(subset=subset).count() == 4
    assert subset.report["splits"] == {"train": 4, "val": 0, "test": 0}


def test_it_records_the_file(imported: CorpusImport, alice: Any) -> None:
    assert imported.file_name == "audiocaps_small.csv"
    assert len(imported.sha256) == 64
    assert imported.imported_by == alice


def test_importing_again_changes_nothing(imported: CorpusImport, project: Project) -> None:
    before = counts()

    again = captions_import(project=project, path=AUDIOCAPS, fmt="audiocaps", split="train")

    assert (again.clips_created, again.captions_created, again.captions_existing) == (0, 0, 5)
    assert counts()[:3] == before[:3]


def test_it_reuses_clips_that_exist_already(project: Project) -> None:
    clip = Clip.objects.create(
        source=Clip.Source.YOUTUBE, youtube_id="BBBBBBBBBBB", start_seconds=0, end_seconds=10
    )

    record = captions_import(project=project, path=AUDIOCAPS, fmt="audiocaps", split="train")

    assert record.clips_created == 3
    assert Caption.objects.get(external_id="103").clip == clip


def test_another_project_shares_the_audiocaps_clips_but_imports_captions_of_its_own(
    imported: CorpusImport, project: Project, olive: Any
) -> None:
    birds = Project.objects.get(slug="birds")

    record = captions_import(project=birds, path=AUDIOCAPS, fmt="audiocaps", split="train")

    assert (record.clips_created, record.captions_created, record.captions_existing) == (0, 5, 0)
    assert Subset.objects.get(project=birds, slug="audiocaps").clips.count() == 4
    ours = set(Caption.objects.filter(imported_into=project).values_list("pk", flat=True))
    theirs = set(Caption.objects.filter(imported_into=birds).values_list("pk", flat=True))
    assert len(ours) == len(theirs) == 5
    assert not ours & theirs


def test_a_project_corpus_leaves_out_captions_another_project_imported_on_its_clips(
    imported: CorpusImport, olive: Any, tmp_path: Path
) -> None:
    birds = Project.objects.get(slug="birds")
    path = tmp_path / "birds.csv"
    path.write_text("audiocap_id,youtube_id,start_time,caption\n900,AAAAAAAAAAA,30,A bird sings\n")

    captions_import(project=birds, path=path, fmt="audiocaps", split="train")

    texts = [c.text for c in approved_captions(birds, "train")]
    assert texts == ["A bird sings"]  # not "A dog barks twice", imported into sounds
    assert len(approved_captions(imported.project, "train")) == 5


def test_a_fix_to_one_project_caption_leaves_the_other_project_copy_alone(
    imported: CorpusImport, project: Project, olive: Any
) -> None:
    birds = Project.objects.get(slug="birds")
    captions_import(project=birds, path=AUDIOCAPS, fmt="audiocaps", split="train")

    Caption.objects.filter(imported_into=birds, external_id="103").update(fixed_text="Hail")

    ours = Caption.objects.get(imported_into=project, external_id="103")
    assert ours.current_text == "Rain falls on a tin roof"


def test_clotho_clips_belong_to_the_project_that_imported_them(
    project: Project, olive: Any
) -> None:
    birds = Project.objects.get(slug="birds")
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    record = captions_import(project=birds, path=CLOTHO, fmt="clotho", split="train")

    assert record.clips_created == Clip.objects.filter(project=project).count() > 0
    assert not Clip.objects.filter(source=Clip.Source.LOCAL, project__isnull=True).exists()
    theirs = Subset.objects.get(project=birds, slug="clotho").clips.all()
    assert {clip.project_id for clip in theirs} == {birds.pk}


@pytest.mark.parametrize(
    "content",
    [
        b"id,youtube_id,start_time,caption\r\n1,AAAAAAAAAAA,0,a dog\r\n",
        b"audiocap_id,youtube_id,start_time,caption\r\n1,AAAAAAAAAAA,0,ok words\r\n2,B,0,x\r\n",
        b'audiocap_id,youtube_id,start_time,caption\r\n1,AAAAAAAAAAA,0,"bad "quote" here"\r\n',
        b"audiocap_id,youtube_id,start_time,caption\r\n1,AAAAAAAAAAA,0,caf\xe9\r\n",
        # a NUL, which PostgreSQL refuses to store, and a line break, which would split the
        # caption's row on export
        b"audiocap_id,youtube_id,start_time,caption\r\n1,AAAAAAAAAAA,0,a dog\x00 barks\r\n",
        b'audiocap_id,youtube_id,start_time,caption\r\n1,AAAAAAAAAAA,0,"a dog\r\nbarks"\r\n',
        "audiocap_id,youtube_id,start_time,caption\r\n1,AAAAAAAAAAA,0,a dog\r\n".encode(
            "utf-16-le"
        ),
    ],
    ids=["header", "youtube id", "quoting", "latin-1", "nul", "line break", "utf-16"],
)
def test_a_malformed_file_writes_nothing(project: Project, tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    before = counts()

    with pytest.raises(ValidationError, match=r"bad\.csv, line \d+: .* nothing was imported"):
        captions_import(project=project, path=path, fmt="audiocaps", split="train")

    assert counts() == before
    assert not Subset.objects.filter(project=project).exists()


def test_a_caption_that_changed_since_its_import_is_refused(
    imported: CorpusImport, project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "changed.csv"
    path.write_bytes(AUDIOCAPS.read_bytes().replace(b"Rain falls", b"Hail falls"))
    before = counts()

    with pytest.raises(ValidationError, match="line 4: caption 103 was imported before"):
        captions_import(project=project, path=path, fmt="audiocaps", split="train")

    assert counts() == before


def test_a_clip_already_in_another_split_is_refused(
    imported: CorpusImport, project: Project
) -> None:
    before = counts()

    with pytest.raises(ValidationError, match="line 2: this clip is already in the train split"):
        captions_import(project=project, path=AUDIOCAPS, fmt="audiocaps", split="val")

    assert counts() == before


def test_it_imports_clotho_as_local_clips_with_stable_ids(project: Project) -> None:
    record = captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    assert (record.rows, record.clips_created, record.captions_created) == (2, 2, 10)
    clip = Clip.objects.get(original_name="birds at dawn.wav")
    assert clip.source == Clip.Source.LOCAL
    assert clip.duration_seconds is None
    ids = list(clip.captions.order_by("pk").values_list("external_id", flat=True))
    assert ids == [f"birds at dawn.wav#{n}" for n in range(1, 6)]
    assert clip.captions.get(external_id="birds at dawn.wav#4").text == " A bird calls loudly "
    assert Subset.objects.get(project=project, slug="clotho").clips.count() == 2


def test_clotho_names_repeated_in_another_split_are_other_clips(project: Project) -> None:
    """Clotho development and validation share some file names for different recordings."""
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    record = captions_import(project=project, path=CLOTHO, fmt="clotho", split="val")

    assert record.clips_created == 2
    assert Clip.objects.filter(original_name="birds at dawn.wav").count() == 2


def test_it_refuses_an_unknown_format_or_split(project: Project) -> None:
    with pytest.raises(ValidationError, match="Unknown format 'csv'"):
        captions_import(project=project, path=AUDIOCAPS, fmt="csv", split="train")
    with pytest.raises(ValidationError, match="Unknown split 'dev'"):
        captions_import(project=project, path=AUDIOCAPS, fmt="audiocaps", split="dev")


def test_the_command_runs_the_import_as_a_job(project: Project) -> None:
    call_command(
        "import_captions",
        str(AUDIOCAPS),
        "--format",
        "audiocaps",
        "--split",
        "test",
        "--project",
        "sounds",
        stdout=io.StringIO(),
    )

    job = Job.objects.get(kind="captions_import")
    assert job.state == Job.State.SUCCEEDED
    assert job.project == project
    assert job.result["captions_created"] == 5


def test_the_command_reports_a_malformed_file(project: Project, tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b"nope\r\n")

    with pytest.raises(CommandError, match=r"bad\.csv, line 1: header is 'nope'"):
        call_command(
            "import_captions",
            str(path),
            "--format",
            "audiocaps",
            "--split",
            "train",
            stdout=io.StringIO(),
        )


def test_the_command_needs_a_project_when_there_are_several(project: Project, olive: Any) -> None:
    with pytest.raises(CommandError, match="Several projects exist; name one with --project"):
        call_command("import_captions", str(AUDIOCAPS), "--format", "audiocaps", "--split", "train")


def test_the_import_subset_page_shows_its_splits(imported: CorpusImport, alice: Any) -> None:
    from django.urls import reverse

    from tests.conftest import login

    response = login(alice).get(reverse("subset_detail", args=["sounds", "audiocaps"]))

    assert response.status_code == 200
    assert b"AudioCaps (imported)" in response.content
