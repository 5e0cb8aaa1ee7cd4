"""AudioCaps' curated ontology as data: the paper's Figure 7 word labels resolved to AudioSet
mids (curation/fixtures/audiocaps_word_labels.csv and its unresolved list), and the bundled
flag set, applied per project."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from core.models import Project
from curation import audiocaps
from curation.audiocaps import (
    FIGURE_7,
    FLAG_SET,
    UNRESOLVED,
    WORD_LABELS,
    resolve_figure_7,
    unresolved_csv,
    word_labels_csv,
)
from curation.models import Label, LabelCuration, WordLabel
from curation.services import label_curate, label_flags_apply, ontology_import, word_labels_import
from tests.conftest import FIXTURES

# the whole AudioSet ontology, byte for byte the one in ../shared/data
ONTOLOGY = FIXTURES / "audioset_ontology.json"


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write(tmp_path: Path, text: str, name: str = "flags.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# The word labels against the real ontology ----------------------------------------------


@pytest.mark.shared_data
def test_every_word_label_in_the_csv_is_a_real_mid_or_listed_unresolved(
    shared_data: Path,
) -> None:
    entries = json.loads((shared_data / "audioset" / "ontology.json").read_text())
    names = {e["id"]: e["name"] for e in entries}
    rows, unresolved = rows_of(WORD_LABELS), rows_of(UNRESOLVED)

    for row in rows:
        mids = row["labels"].split(";")
        assert all(mid in names for mid in mids), row
        assert row["names"].split(";") == [names[mid] for mid in mids], row
    assert all(u["reason"].strip() and u["figure_name"].strip() for u in unresolved)
    words = {row["word"] for row in rows}
    given_up = {u["figure_name"] for u in unresolved}
    for _, figure_words in FIGURE_7:
        for word in figure_words:
            assert word.lower() in words or set(word.split(" / ")) <= given_up, word


@pytest.mark.shared_data
def test_the_bundled_files_are_what_the_script_makes_from_the_shared_ontology(
    shared_data: Path,
) -> None:
    audioset = shared_data / "audioset"
    entries = json.loads((audioset / "ontology.json").read_text())
    with (audioset / "class_labels_indices.csv").open(newline="") as handle:
        trainable = {row["mid"] for row in csv.DictReader(handle)}

    rows, unresolved = resolve_figure_7(entries, trainable=trainable)

    assert word_labels_csv(rows) == WORD_LABELS.read_text(encoding="utf-8")
    assert unresolved_csv(unresolved) == UNRESOLVED.read_text(encoding="utf-8")


@pytest.mark.shared_data
def test_every_bundled_flag_names_a_real_label_by_its_name(shared_data: Path) -> None:
    entries = json.loads((shared_data / "audioset" / "ontology.json").read_text())
    names = {e["id"]: e["name"] for e in entries}

    rows = rows_of(FLAG_SET)

    assert rows
    assert all(names.get(row["mid"]) == row["name"] and row["reason"] for row in rows)


def test_the_script_rewrites_the_bundled_files_from_an_ontology(
    tmp_path: Path, capsys: Any
) -> None:
    shutil.copy(ONTOLOGY, tmp_path / "ontology.json")

    assert audiocaps.main([str(tmp_path / "ontology.json"), str(tmp_path)]) == 0

    assert (tmp_path / WORD_LABELS.name).read_text() == WORD_LABELS.read_text()
    assert (tmp_path / UNRESOLVED.name).read_text() == UNRESOLVED.read_text()
    assert "68 word labels (69 AudioSet labels), 0 names unresolved" in capsys.readouterr().out


def test_it_lists_a_name_it_cannot_resolve_with_the_reason() -> None:
    rows, unresolved = resolve_figure_7([{"id": "/m/03kmc9", "name": "Siren"}])

    assert [row.mids for row in rows] == [["/m/03kmc9"]]
    reasons = {u.figure_name: (u.super_categories, u.reason) for u in unresolved}
    assert reasons["Train horn"] == (
        ["alarm"],
        "no ontology class has this name (nor the same words without punctuation)",
    )
    assert reasons["Hiss"][0] == ["other_things", "source_ambiguous", "animal"]  # listed once
    assert len(unresolved) == len(reasons)


def test_it_refuses_to_guess_between_classes_of_the_same_name() -> None:
    entries = [{"id": "/m/1", "name": "Hiss"}, {"id": "/m/2", "name": "Hiss"}]

    _, unresolved = resolve_figure_7(entries)

    (hiss,) = [u for u in unresolved if u.figure_name == "Hiss"]
    assert hiss.reason.startswith("ambiguous: the ontology has several classes of this name")
    assert "/m/1 'Hiss', /m/2 'Hiss'" in hiss.reason


def test_it_matches_a_name_the_figure_prints_without_and_and_says_so() -> None:
    rows, _ = resolve_figure_7([{"id": "/m/04brg2", "name": "Dishes, pots, and pans"}])

    assert rows[0].word == "dishes, pots, pans"
    assert rows[0].notes == [
        "the figure writes 'Dishes, pots, pans'; the ontology names it 'Dishes, pots, and pans'"
    ]


def test_a_word_label_under_several_groups_keeps_them_all() -> None:
    rows, _ = resolve_figure_7(json.loads(ONTOLOGY.read_text()))

    groups = {row.word: row.super_categories for row in rows}
    assert groups["hiss"] == ["other_things", "source_ambiguous", "animal"]
    assert groups["trickle, dribble"] == ["other_things", "natural"]
    assert groups["siren"] == ["alarm"]


# Importing the word labels ---------------------------------------------------------------


@pytest.fixture
def ontology(db: None) -> None:
    ontology_import(path=ONTOLOGY)


def test_it_imports_the_bundled_word_labels_with_every_group(ontology: None) -> None:
    result = word_labels_import(path=WORD_LABELS)

    assert result == {"words": 68, "labels": 69}
    hiss = Label.objects.get(mid="/m/07rjwbb").word_label
    assert hiss is not None
    assert hiss.super_categories == ["other_things", "source_ambiguous", "animal"]
    bird = WordLabel.objects.get(name__startswith="bird vocalization")
    assert sorted(bird.labels.values_list("name", flat=True)) == [
        "Bird vocalization, bird call, bird song",
        "Chirp, tweet",
    ]


def test_importing_again_replaces_a_words_groups(ontology: None, tmp_path: Path) -> None:
    word_labels_import(
        path=write(tmp_path, "word,super_category,labels\nhiss,animal;natural,Hiss\n")
    )

    word_labels_import(path=write(tmp_path, "word,super_category,labels\nhiss,natural,Hiss\n"))

    assert WordLabel.objects.get(name="hiss").super_categories == ["natural"]


def test_it_refuses_an_unknown_group_among_several_and_writes_nothing(
    ontology: None, tmp_path: Path
) -> None:
    path = write(
        tmp_path, "word,super_category,labels\nsiren,alarm,Siren\nhiss,animal;weather,Hiss\n"
    )

    with pytest.raises(ValidationError, match=r"line 3: super_category 'weather' is not one of"):
        word_labels_import(path=path)
    assert not WordLabel.objects.exists()


def test_the_command_imports_the_bundled_word_labels(ontology: None) -> None:
    out = io.StringIO()

    call_command("import_word_labels", "--audiocaps", stdout=out)

    assert "68 word labels covering 69 AudioSet labels" in out.getvalue()
    assert WordLabel.objects.count() == 68


def test_the_command_wants_a_file_or_the_bundled_set(ontology: None) -> None:
    with pytest.raises(CommandError, match="a CSV file or --audiocaps"):
        call_command("import_word_labels", stdout=io.StringIO())


# The flags, per project ------------------------------------------------------------------


def flags_of(project: Project) -> dict[str, tuple[bool, bool, bool]]:
    return {
        c.label.mid: (c.needs_visuals, c.needs_expertise, c.excluded)
        for c in LabelCuration.objects.filter(project=project).select_related("label")
    }


def test_it_sets_the_bundled_flags_on_the_project(ontology: None, project: Project) -> None:
    result = label_flags_apply(project=project)

    flags = flags_of(project)
    assert result == {"labels": len(rows_of(FLAG_SET)), "changed": len(rows_of(FLAG_SET))}
    assert flags["/t/dd00125"] == (True, False, False)  # Inside, small room
    assert flags["/m/04gxbd"] == (False, True, False)  # Power windows, electric windows
    note = LabelCuration.objects.get(project=project, label__mid="/t/dd00125").note
    assert note.startswith("needs visuals: The paper's own example")


def test_applying_the_flags_again_changes_nothing(ontology: None, project: Project) -> None:
    label_flags_apply(project=project)
    before = sorted(LabelCuration.objects.values_list("pk", "label", "needs_visuals", "note"))

    result = label_flags_apply(project=project)

    assert result["changed"] == 0
    assert sorted(LabelCuration.objects.values_list("pk", "label", "needs_visuals", "note")) == (
        before
    )


def test_the_flags_go_to_one_project_only(ontology: None, project: Project, olive: User) -> None:
    label_flags_apply(project=project)

    assert flags_of(Project.objects.get(slug="birds")) == {}


def test_it_keeps_a_researchers_own_flags_and_note(ontology: None, project: Project) -> None:
    room = Label.objects.get(mid="/t/dd00125")
    label_curate(
        project=project,
        label=room,
        needs_visuals=False,
        needs_expertise=False,
        excluded=True,
        note="mine",
    )

    label_flags_apply(project=project)

    curation = LabelCuration.objects.get(project=project, label=room)
    assert (curation.needs_visuals, curation.excluded, curation.note) == (True, True, "mine")


def test_it_refuses_a_flag_file_whose_mid_names_another_label(
    ontology: None, project: Project, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "mid,name,flag,reason\n"
        '/t/dd00125,"Inside, small room",needs_visuals,a room\n'
        '/m/09x0r,"Inside, large room or hall",needs_visuals,a hall\n',
    )

    with pytest.raises(ValidationError, match=r"line 3: /m/09x0r is 'Speech' in the ontology"):
        label_flags_apply(project=project, path=path)
    assert not LabelCuration.objects.exists()


def test_it_refuses_an_unknown_flag_naming_the_line(
    ontology: None, project: Project, tmp_path: Path
) -> None:
    path = write(tmp_path, "mid,name,flag,reason\n/m/09x0r,Speech,loud,why\n")

    with pytest.raises(ValidationError, match=r"flags.csv, line 2: flag 'loud' is not one of"):
        label_flags_apply(project=project, path=path)


def test_it_says_to_import_the_ontology_first(project: Project) -> None:
    with pytest.raises(ValidationError, match="no ontology loaded: run import_ontology"):
        label_flags_apply(project=project)


def test_the_command_applies_the_flags_to_a_project(ontology: None, project: Project) -> None:
    out = io.StringIO()

    call_command("apply_label_flags", "--project", project.slug, stdout=out)

    assert f"{len(rows_of(FLAG_SET))} labels flagged in sounds" in out.getvalue()
    assert flags_of(project)["/m/0chx_"] == (False, True, False)  # White noise


def test_the_command_names_an_unknown_project(ontology: None) -> None:
    with pytest.raises(CommandError, match="No project with slug 'nope'"):
        call_command("apply_label_flags", "--project", "nope", stdout=io.StringIO())
