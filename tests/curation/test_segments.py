from __future__ import annotations

import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection

from core.models import Job
from curation.models import Clip, Label
from curation.segments import read_segments
from curation.services import ontology_import, segments_import
from curation.services import segments as segment_services
from tests.conftest import FIXTURES

BALANCED = FIXTURES / "segments" / "balanced_head.csv"
SPREADSHEET = FIXTURES / "segments" / "unbalanced_spreadsheet_head.csv"
HEADER = "# Segments csv\n# num_ytids=1\n# YTID, start_seconds, end_seconds, positive_labels\n"


@pytest.fixture
def ontology(db: None) -> None:
    ontology_import(path=FIXTURES / "audioset_ontology.json")


def write_csv(tmp_path: Path, *rows: str, name: str = "segments.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "".join(f"{row}\n" for row in rows))
    return path


def labels_of(youtube_id: str, start: str = "30") -> set[str]:
    clip = Clip.objects.get(youtube_id=youtube_id, start_seconds=Decimal(start))
    return set(clip.labels.values_list("mid", flat=True))


def test_it_imports_the_official_format(ontology: None) -> None:
    result = segments_import(path=BALANCED, segment_list="balanced")

    assert result["rows"] == 50
    assert result["clips_created"] == 50
    clip = Clip.objects.get(youtube_id="--PJHxphWEs")
    assert (clip.start_seconds, clip.end_seconds) == (Decimal("30.000"), Decimal("40.000"))
    assert clip.source == Clip.Source.YOUTUBE
    assert clip.segment_list == Clip.SegmentList.BALANCED
    assert clip.status == Clip.Status.PENDING
    assert labels_of("--PJHxphWEs") == {"/m/09x0r", "/t/dd00088"}


def test_it_reads_the_spreadsheet_mangled_format(ontology: None) -> None:
    result = segments_import(path=SPREADSHEET, segment_list="unbalanced")

    assert result["clips_created"] == 20
    assert labels_of("---1_cCGK4M", start="0") == {
        "/m/01g50p",
        "/m/0284vy3",
        "/m/06d_3",
        "/m/07jdr",
        "/m/07rwm0c",
    }
    clip = Clip.objects.get(youtube_id="---1_cCGK4M")
    assert clip.end_seconds == Decimal("10")


def test_it_does_not_duplicate_clips_on_reimport(ontology: None) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    links = Clip.labels.through.objects.count()

    result = segments_import(path=BALANCED, segment_list="balanced")

    assert result["clips_created"] == 0
    assert result["clips_existing"] == 50
    assert Clip.objects.count() == 50
    assert Clip.labels.through.objects.count() == links


def test_it_merges_the_labels_of_a_segment_repeated_in_one_file(
    ontology: None, tmp_path: Path
) -> None:
    path = write_csv(
        tmp_path,
        'abcdefghijk, 30.000, 40.000, "/m/09x0r"',
        'abcdefghijk, 30.000, 40.000, "/m/09x0r,/m/0bt9lr"',
    )

    result = segments_import(path=path, segment_list="eval")

    assert result["repeated_rows"] == 1
    assert Clip.objects.count() == 1
    assert labels_of("abcdefghijk") == {"/m/09x0r", "/m/0bt9lr"}


def test_it_adds_new_labels_to_a_clip_from_an_earlier_file(ontology: None, tmp_path: Path) -> None:
    segments_import(
        path=write_csv(tmp_path, 'abcdefghijk, 30, 40, "/m/09x0r"', name="a.csv"),
        segment_list="eval",
    )
    segments_import(
        path=write_csv(tmp_path, 'abcdefghijk, 30, 40, "/m/0bt9lr"', name="b.csv"),
        segment_list="eval",
    )

    assert Clip.objects.count() == 1
    assert labels_of("abcdefghijk") == {"/m/09x0r", "/m/0bt9lr"}


def test_it_links_a_clip_added_by_another_import_meanwhile(
    ontology: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("only the PostgreSQL import looks for existing clips before adding new ones")
    insert_staged_clips = segment_services._insert_staged_clips

    def another_import_first(*args: Any, **kwargs: Any) -> int:
        # the clip appears after the import looked for existing clips, before it adds its own
        Clip.objects.create(
            source=Clip.Source.YOUTUBE, youtube_id="abcdefghijk", start_seconds=30, end_seconds=40
        )
        return insert_staged_clips(*args, **kwargs)

    monkeypatch.setattr(segment_services, "_insert_staged_clips", another_import_first)
    path = write_csv(tmp_path, 'abcdefghijk, 30, 40, "/m/09x0r"', 'bbcdefghijk, 30, 40, "/m/09x0r"')

    result = segments_import(path=path, segment_list="eval")

    assert (result["clips_created"], result["clips_existing"]) == (1, 1)
    assert labels_of("abcdefghijk") == {"/m/09x0r"}
    assert labels_of("bbcdefghijk") == {"/m/09x0r"}


def test_it_keeps_the_end_of_the_first_row_of_a_repeated_segment(
    ontology: None, tmp_path: Path
) -> None:
    path = write_csv(
        tmp_path,
        'abcdefghijk, 30.000, 40.000, "/m/09x0r"',
        'abcdefghijk, 30.000, 35.000, "/m/09x0r"',
    )

    segments_import(path=path, segment_list="eval")

    assert Clip.objects.get(youtube_id="abcdefghijk").end_seconds == Decimal("40.000")


def test_it_reports_progress_between_batches(ontology: None, tmp_path: Path) -> None:
    rows = [f'clip{n:07d}, 0, 10, "/m/09x0r"' for n in range(5)]
    seen = []

    def progress(done: int, total: int | None = None, message: str = "") -> None:
        # core.services.Progress may write through the import's own connection, so that
        # connection must be free (no COPY in flight) whenever progress is reported
        seen.append((done, Clip.objects.count()))

    segments_import(
        path=write_csv(tmp_path, *rows), segment_list="eval", progress=progress, batch_size=2
    )

    assert [done for done, _ in seen] == [5, 7, 8]
    assert Clip.objects.count() == 5


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ('too_short, 30, 40, "/m/09x0r"', "is not a YouTube id"),
        ('abcdefghijk, thirty, 40, "/m/09x0r"', "start 'thirty' is not a number"),
        ('abcdefghijk, 40, 30, "/m/09x0r"', "end 30.000 is not after start 40.000"),
        ('abcdefghijk, 0, 600, "/m/09x0r"', "more than 60 s"),
        ('abcdefghijk, 1000000, 1000010, "/m/09x0r"', "start '1000000' is more than 999999.999 s"),
        ('abcdefghijk, 1e40, 40, "/m/09x0r"', "start '1e40' is more than 999999.999 s"),
        ('abcdefghijk, NaN, 40, "/m/09x0r"', "start 'NaN' is not a non-negative time"),
        ("abcdefghijk, 30, 40", "expected 4 columns"),
        ('abcdefghijk, 30, 40, ""', "no labels"),
        ('abcdefghijk, 30, 40, "dog"', "'dog' is not an AudioSet label id"),
        ('abcdefghijk, 30, 40, "/m/zzzzzzz"', "/m/zzzzzzz are not in the imported ontology"),
        # the first row made 0, 10 and /m/09x0r known to the reader's fast path
        (
            'abcdefghijk, 0, 10, "/m/09x0r,/m/zzzzzzz"',
            "/m/zzzzzzz are not in the imported ontology",
        ),
        ('abcdefghijk, 10, 0, "/m/09x0r"', "end 0.000 is not after start 10.000"),
        ('abcdefghij, 0, 10, "/m/09x0r"', "'abcdefghij' is not a YouTube id"),
        ('abcdefghijk, 0, 10, "/m/09x0r,dog"', "'dog' is not an AudioSet label id"),
    ],
)
def test_it_names_the_file_line_and_reason_of_a_malformed_row(
    ontology: None, tmp_path: Path, row: str, reason: str
) -> None:
    path = write_csv(tmp_path, 'zyxwvutsrqp, 0, 10, "/m/09x0r"', row)

    with pytest.raises(ValidationError) as error:
        segments_import(path=path, segment_list="eval")

    message = error.value.messages[0]
    assert "segments.csv, line 5" in message
    assert reason in message
    assert "nothing from this file was imported" in message


def test_it_keeps_nothing_from_a_file_that_fails_after_several_batches(
    ontology: None, tmp_path: Path
) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    good = [f'clip{n:07d}, 0, 10, "/m/09x0r"' for n in range(7)]
    path = write_csv(tmp_path, *good, "clip9999999, 0, 10, not-a-label")

    with pytest.raises(ValidationError, match="line 11"):
        segments_import(path=path, segment_list="eval", batch_size=2)

    assert Clip.objects.count() == 50
    assert not Clip.objects.filter(youtube_id__startswith="clip").exists()


def test_it_refuses_to_import_before_the_ontology(db: None) -> None:
    with pytest.raises(ValidationError, match="run import_ontology first"):
        segments_import(path=BALANCED, segment_list="balanced")


def test_it_refuses_an_unknown_segment_list(ontology: None) -> None:
    with pytest.raises(ValidationError, match="Unknown segment list 'training'"):
        segments_import(path=BALANCED, segment_list="training")


def test_it_refuses_a_file_that_is_not_text(ontology: None, tmp_path: Path) -> None:
    path = tmp_path / "binary.csv"
    path.write_bytes(b"\xff\xfe\x00\x81" * 100)

    with pytest.raises(ValidationError, match=r"binary\.csv"):
        segments_import(path=path, segment_list="eval")
    assert Clip.objects.count() == 0


@pytest.mark.parametrize(
    "content", ["", HEADER, "\n\n  \n"], ids=["empty", "comments only", "blank lines"]
)
def test_it_refuses_a_file_without_segments(ontology: None, tmp_path: Path, content: str) -> None:
    path = tmp_path / "segments.csv"
    path.write_text(content)

    with pytest.raises(ValidationError) as error:
        segments_import(path=path, segment_list="eval")

    assert error.value.messages == [
        "segments.csv: no segments (the file is empty or holds only comment lines); expected "
        "rows of YTID, start_seconds, end_seconds, labels — nothing from this file was imported."
    ]
    assert Clip.objects.count() == 0


def test_the_command_fails_on_a_file_without_segments(ontology: None, tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")

    with pytest.raises(CommandError, match=r"empty\.csv: no segments"):
        call_command("import_segments", str(path), "--source", "eval", stdout=io.StringIO())
    assert Job.objects.get(kind="segments_import").state == Job.State.FAILED


@pytest.mark.parametrize(
    ("encoding", "described"),
    [
        ("utf-16-le", "UTF-16 (little-endian, no byte-order mark)"),
        ("utf-16-be", "UTF-16 (big-endian, no byte-order mark)"),
        ("utf-16", "UTF-16 (little-endian, with a byte-order mark)"),
    ],
)
def test_it_says_a_utf16_file_is_utf16(
    ontology: None, tmp_path: Path, encoding: str, described: str
) -> None:
    path = tmp_path / "segments.csv"
    path.write_bytes((HEADER + 'abcdefghijk, 0, 10, "/m/09x0r"\n').encode(encoding))

    with pytest.raises(ValidationError) as error:
        segments_import(path=path, segment_list="eval")

    assert error.value.messages[0].startswith(f"segments.csv: the file is {described} text;")
    assert "save it as UTF-8" in error.value.messages[0]
    assert Clip.objects.count() == 0


def test_it_runs_as_a_command_recorded_as_a_job(ontology: None) -> None:
    call_command("import_segments", str(BALANCED), "--source", "balanced", stdout=io.StringIO())

    job = Job.objects.get(kind="segments_import")
    assert job.state == Job.State.SUCCEEDED
    assert job.result["clips_created"] == 50
    assert job.progress_done == job.progress_total


def test_it_fails_the_command_with_the_line_of_a_bad_row(ontology: None, tmp_path: Path) -> None:
    path = write_csv(tmp_path, "abcdefghijk, 0, 10, nope")

    with pytest.raises(CommandError, match="line 4"):
        call_command("import_segments", str(path), "--source", "eval", stdout=io.StringIO())
    assert Job.objects.get(kind="segments_import").state == Job.State.FAILED


@pytest.mark.shared_data
def test_it_imports_the_real_balanced_and_eval_lists(shared_data: Path, db: None) -> None:
    audioset = shared_data / "audioset"
    ontology_import(path=audioset / "ontology.json")

    segments_import(path=audioset / "balanced_train_segments.csv", segment_list="balanced")
    segments_import(path=audioset / "eval_segments.csv", segment_list="eval")

    assert Label.objects.count() == 632
    assert Clip.objects.count() == 42_531
    assert Clip.objects.filter(segment_list="eval").count() == 20_371
    assert labels_of("--PJHxphWEs") == {"/m/09x0r", "/t/dd00088"}
    assert labels_of("zzya4dDVRLk") == {"/m/01v_m0", "/m/0hdsk"}
    assert labels_of("zzbTaK7CXJY") == {"/m/03m9d0z", "/m/07qwyj0", "/t/dd00092"}


def test_its_fast_path_reads_tricky_rows_like_the_careful_one(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path,
        'abcdefghijk, 30.000, 40.000, "/m/09x0r,/t/dd00088"',
        # the same pieces again: the fast path takes these
        'bbcdefghijk, 30.000, 40.000, "/m/09x0r,/t/dd00088"',
        'cbcdefghijk, 30.000, 40.000, "/t/dd00088,/m/09x0r"',
        # and must leave these to the careful path
        'dbcdefghijk, 30.000, 40.000, "/m/09x0r,/m/09x0r"',
        'ebcdefghijk, 30.000, 40.000, "/m/09x0r, /t/dd00088"',
        'fbcdefghijk, 30.000, 40.000, " /m/09x0r,/t/dd00088 "',
        'gbcdefghijk, 30.000, 40.000, "/m/09x0r,,/t/dd00088"',
        "hbcdefghijk, 30.000, 40.000, /m/09x0r, /t/dd00088,,",
        'ibcdefghijk ,30.000 ,40.000 , "/m/09x0r"',
        'jbcdefghijk, 30, 40.000, "/m/09x0r"',
        'kbcdefghijk, 30.0004, 40.0005, "/m/09x0r"',
    )

    fast = list(read_segments(path))

    assert fast == list(read_segments(path, fast=False))
    assert fast[0] == (4, "abcdefghijk", 30_000, 40_000, ("/m/09x0r", "/t/dd00088"))
    assert fast[3][4] == ("/m/09x0r",)
    assert {segment[4] for segment in fast[4:8]} == {("/m/09x0r", "/t/dd00088")}
    assert fast[8][1:4] == ("ibcdefghijk", 30_000, 40_000)
    assert fast[9][2] == 30_000
    assert fast[10][2:4] == (30_000, 40_000)  # quantized to the millisecond, half to even


@pytest.mark.shared_data
@pytest.mark.parametrize(
    "name",
    [
        "balanced_train_segments.csv",
        "eval_segments.csv",
        "unbalanced_train_segments.partial.csv",  # the spreadsheet layout
    ],
)
def test_its_fast_path_reads_the_real_lists_like_the_careful_one(
    shared_data: Path, name: str
) -> None:
    path = shared_data / "audioset" / name

    assert list(read_segments(path)) == list(read_segments(path, fast=False))
