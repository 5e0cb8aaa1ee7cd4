"""The ontology page's cached clip counts per label and AudioSet list (LabelSourceCount):
every way links change keeps them equal to a fresh GROUP BY over the links."""

from __future__ import annotations

import importlib
import io
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import FileField
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from core.models import Project
from curation import synth
from curation.models import Clip, Label, LabelSourceCount
from curation.services import (
    clips_import_local,
    label_counts_refresh,
    ontology_import,
    segments_import,
)
from tests.conftest import FIXTURES, login

BALANCED = FIXTURES / "segments" / "balanced_head.csv"
SPREADSHEET = FIXTURES / "segments" / "unbalanced_spreadsheet_head.csv"
HEADER = "# Segments csv\n# num_ytids=1\n# YTID, start_seconds, end_seconds, positive_labels\n"
SPEECH, DOG, MUSIC = "/m/09x0r", "/m/0bt9lr", "/m/04rlf"


@pytest.fixture
def ontology(db: None) -> None:
    ontology_import(path=FIXTURES / "audioset_ontology.json")


def write_csv(tmp_path: Path, *rows: str, name: str = "segments.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "".join(f"{row}\n" for row in rows))
    return path


def cached() -> dict[tuple[str, str], int]:
    """(mid, list) -> cached count, zero rows left out."""
    rows = LabelSourceCount.objects.filter(clips__gt=0).values_list(
        "label__mid", "segment_list", "clips"
    )
    return {(mid, segment_list): n for mid, segment_list, n in rows}


def recounted() -> dict[tuple[str, str], int]:
    """The same counts straight from the links, the way the page used to compute them."""
    links = Clip.labels.through.objects.values_list("label__mid", "clip__segment_list")
    return dict(Counter(links))


def label(mid: str) -> Label:
    return Label.objects.get(mid=mid)


# Segment imports ---------------------------------------------------------------------------


def test_it_counts_an_imported_file(ontology: None) -> None:
    segments_import(path=BALANCED, segment_list="balanced")

    assert cached() == recounted()
    assert cached()[(SPEECH, "balanced")] == 9
    assert LabelSourceCount.objects.filter(segment_list="balanced").count() == len(cached())


def test_it_keeps_the_counts_when_a_file_is_imported_again(ontology: None) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    before = cached()

    segments_import(path=BALANCED, segment_list="balanced")

    assert cached() == before == recounted()


def test_it_counts_labels_a_later_file_adds_under_the_clips_first_list(
    ontology: None, tmp_path: Path
) -> None:
    segments_import(
        path=write_csv(tmp_path, f'abcdefghijk, 30, 40, "{SPEECH}"', name="a.csv"),
        segment_list="balanced",
    )
    segments_import(
        path=write_csv(
            tmp_path,
            f'abcdefghijk, 30, 40, "{SPEECH},{DOG}"',
            f'zyxwvutsrqp, 0, 10, "{DOG}"',
            name="b.csv",
        ),
        segment_list="unbalanced",
    )

    assert cached() == {
        (SPEECH, "balanced"): 1,
        (DOG, "balanced"): 1,
        (DOG, "unbalanced"): 1,
    }


def test_it_leaves_the_old_counts_when_an_import_fails(ontology: None, tmp_path: Path) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    before = cached()
    good = [f'clip{n:07d}, 0, 10, "{SPEECH}"' for n in range(7)]
    path = write_csv(tmp_path, *good, "clip9999999, 0, 10, not-a-label")

    with pytest.raises(ValidationError, match="line 11"):
        segments_import(path=path, segment_list="eval", batch_size=2)

    assert cached() == before == recounted()
    assert not LabelSourceCount.objects.filter(segment_list="eval").exists()


def test_it_rolls_back_counts_refreshed_in_a_failed_transaction(
    ontology: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the refresh itself succeeds, then the import's transaction fails after it
    from curation.services import segments as segment_services

    segments_import(path=SPREADSHEET, segment_list="unbalanced")
    before = cached()
    real = segment_services.label_counts_refresh

    def refresh_then_fail(**kwargs: Any) -> int:
        real(**kwargs)
        assert (SPEECH, "balanced") in cached()  # the new counts existed inside it
        raise RuntimeError("disk full")

    monkeypatch.setattr(segment_services, "label_counts_refresh", refresh_then_fail)

    with pytest.raises(RuntimeError, match="disk full"):
        segments_import(path=BALANCED, segment_list="balanced")

    assert cached() == before == recounted()


@pytest.mark.django_db(transaction=True)
def test_two_imports_committing_side_by_side_both_count(tmp_path: Path) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite runs one writing transaction at a time")
    ontology_import(path=FIXTURES / "audioset_ontology.json")
    first_csv = write_csv(tmp_path, f'aaaaaaaaaaa, 0, 10, "{SPEECH},{DOG}"', name="a.csv")
    second_csv = write_csv(tmp_path, f'bbbbbbbbbbb, 0, 10, "{SPEECH}"', name="b.csv")
    first_counted, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        try:
            with transaction.atomic():  # holds its counts uncommitted while the second runs
                segments_import(path=first_csv, segment_list="balanced")
                first_counted.set()
                release.wait(10)
        finally:
            connection.close()

    def second() -> None:
        try:
            first_counted.wait(10)
            segments_import(path=second_csv, segment_list="balanced")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    first_counted.wait(10)
    time.sleep(1.0)  # the second reaches its recount and waits there
    release.set()
    for thread in threads:
        thread.join(20)

    assert errors == []
    assert cached() == recounted() == {(SPEECH, "balanced"): 2, (DOG, "balanced"): 1}


# Edits through the ORM (admin, local imports) ----------------------------------------------


def test_it_counts_down_a_deleted_clip(ontology: None) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    clip = Clip.objects.filter(labels__mid=SPEECH).first()
    assert clip is not None
    before = cached()[(SPEECH, "balanced")]

    clip.delete()

    assert cached()[(SPEECH, "balanced")] == before - 1
    assert cached() == recounted()


def test_it_counts_down_clips_deleted_in_bulk(ontology: None) -> None:
    segments_import(path=BALANCED, segment_list="balanced")

    Clip.objects.filter(labels__mid=SPEECH).delete()

    assert (SPEECH, "balanced") not in cached()
    assert cached() == recounted()


def test_it_follows_a_clips_labels_edited_in_the_admin(ontology: None, staff: Any) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    clip = Clip.objects.filter(labels__mid=SPEECH).exclude(labels__mid=DOG).first()
    assert clip is not None
    before = cached()
    url = reverse("admin:curation_clip_change", args=[clip.pk])
    form = login(staff).get(url).context["adminform"].form
    files = {f.name for f in Clip._meta.fields if isinstance(f, FileField)}
    data = {k: v for k, v in form.initial.items() if v is not None and k not in files}
    data.update(labels=str(label(DOG).pk), peaks="[]", created_at_0="2026-01-01")
    data.update(created_at_1="00:00:00", start_seconds="30", end_seconds="40")

    response = login(staff).post(url, data)

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert set(clip.labels.values_list("mid", flat=True)) == {DOG}
    assert cached()[(SPEECH, "balanced")] == before[(SPEECH, "balanced")] - 1
    assert cached()[(DOG, "balanced")] == before.get((DOG, "balanced"), 0) + 1
    assert cached() == recounted()


def test_it_follows_links_added_removed_and_cleared_from_either_side(ontology: None) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    clips = list(Clip.objects.exclude(labels__mid=DOG)[:3])

    clips[0].labels.add(label(DOG), label(SPEECH))  # Speech may already be there
    assert cached() == recounted()
    label(DOG).clips.add(*clips)  # clips[0] already linked: counted once
    assert cached()[(DOG, "balanced")] == recounted()[(DOG, "balanced")]
    clips[1].labels.remove(label(DOG), label(MUSIC))  # Music may not be linked
    assert cached() == recounted()
    label(DOG).clips.remove(clips[2])
    assert cached() == recounted()
    clips[0].labels.clear()
    assert cached() == recounted()
    label(SPEECH).clips.clear()
    assert cached() == recounted()
    assert (SPEECH, "balanced") not in cached()


def test_it_counts_local_imports_as_local(ontology: None, tmp_path: Path) -> None:
    labels = synth.generate_demo_sounds(tmp_path, seconds=1.0, videos=False)

    clips_import_local(project=None, paths=sorted(tmp_path.glob("*.wav")), labels=labels)
    clips_import_local(project=None, paths=sorted(tmp_path.glob("*.wav")), labels=labels)  # a no-op

    assert cached() == recounted()
    assert {segment_list for _, segment_list in cached()} == {""}
    expected = Counter(mid for mids in labels.values() for mid in mids)
    assert {mid: n for (mid, _), n in cached().items()} == dict(expected)


# Repair -------------------------------------------------------------------------------------


def test_it_repairs_the_counts_with_a_command(ontology: None) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    good = cached()
    LabelSourceCount.objects.filter(label__mid=SPEECH).update(clips=999)
    LabelSourceCount.objects.filter(label__mid=MUSIC).delete()
    LabelSourceCount.objects.create(label=label(DOG), segment_list="eval", clips=5)
    out = io.StringIO()

    call_command("refresh_label_counts", stdout=out)

    assert cached() == good == recounted()
    assert f"{len(good)} label/list counts stored" in out.getvalue()


def test_it_recounts_only_the_labels_asked_for(ontology: None) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    LabelSourceCount.objects.update(clips=999)

    written = label_counts_refresh(label_ids=[label(SPEECH).pk])

    assert written == 1
    assert cached()[(SPEECH, "balanced")] == 9
    assert cached()[(MUSIC, "balanced")] == 999


def test_the_migration_counts_links_already_in_the_database(ontology: None) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    LabelSourceCount.objects.all().delete()
    migration = importlib.import_module("curation.migrations.0005_label_source_counts")
    editor = SimpleNamespace(execute=lambda sql: connection.cursor().execute(sql))

    migration.count_existing_links(apps, editor)

    assert cached() == recounted()


# Readers ------------------------------------------------------------------------------------


def test_the_page_reads_the_cache_not_the_links(
    ontology: None, project: Project, alice: Any
) -> None:
    segments_import(path=BALANCED, segment_list="balanced")
    speech = label(SPEECH)
    LabelSourceCount.objects.filter(label=speech).update(clips=4321)
    links = Clip.labels.through._meta.db_table

    with CaptureQueriesContext(connection) as queries:
        response = login(alice).get(reverse("ontology", args=[project.slug]))

    html = response.content.decode()
    row = html[html.index(f'id="label-{speech.pk}"') :]
    assert '<span class="counts"><span>4,321</span>' in row[: row.index("</summary>")]
    assert not [q for q in queries.captured_queries if links in q["sql"]]


def test_the_api_lists_each_labels_cached_counts(
    ontology: None, project: Project, alice: Any
) -> None:
    segments_import(path=BALANCED, segment_list="balanced")

    rows = login(alice).get("/api/labels", {"q": "speech"}).json()

    speech = next(row for row in rows if row["mid"] == SPEECH)
    assert speech["clip_counts"] == {"balanced": 9, "eval": 0, "unbalanced": 0}
