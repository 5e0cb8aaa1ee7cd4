from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from core.models import Project
from curation.models import Label, LabelCuration, WordLabel
from curation.services import label_curate, label_curations, ontology_import, word_labels_import
from tests.conftest import ONTOLOGY_EXCERPT

DEMO_WORDS = ONTOLOGY_EXCERPT.parent / "word_labels_demo.csv"


@pytest.fixture
def ontology(db: None) -> None:
    ontology_import(path=ONTOLOGY_EXCERPT)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "words.csv"
    path.write_text(text)
    return path


def test_it_records_a_researchers_flags_and_note_for_the_project(
    ontology: None, project: Project
) -> None:
    label = Label.objects.get(name="Siren")

    label_curate(
        project=project,
        label=label,
        needs_visuals=True,
        needs_expertise=False,
        excluded=False,
        note="  ambulance or police? ",
    )

    saved = LabelCuration.objects.get(project=project, label=label)
    assert (saved.needs_visuals, saved.needs_expertise, saved.excluded) == (True, False, False)
    assert saved.note == "ambulance or police?"


def test_one_projects_curation_leaves_other_projects_alone(
    ontology: None, project: Project, olive: User
) -> None:
    birds = Project.objects.get(slug="birds")
    label = Label.objects.get(name="Siren")
    label_curate(
        project=birds, label=label, needs_visuals=False, needs_expertise=False, excluded=True
    )

    label_curate(
        project=project, label=label, needs_visuals=True, needs_expertise=True, excluded=False
    )

    assert label_curations(project=birds)[label.pk].excluded
    mine = label_curations(project=project)[label.pk]
    assert (mine.needs_visuals, mine.needs_expertise, mine.excluded) == (True, True, False)


def test_a_project_has_no_flags_until_it_curates(ontology: None, project: Project) -> None:
    assert label_curations(project=project) == {}


def test_it_maps_labels_to_word_labels_and_super_categories(ontology: None) -> None:
    result = word_labels_import(path=DEMO_WORDS)

    assert result == {"words": 7, "labels": 10}
    chirp = Label.objects.get(name="Chirp, tweet")
    assert chirp.word_label is not None
    assert chirp.word_label.name == "bird"
    assert WordLabel.objects.get(name="siren").super_category == "alarm"


def test_it_updates_a_word_labels_category_on_reimport(ontology: None, tmp_path: Path) -> None:
    word_labels_import(path=write(tmp_path, "word,super_category,labels\ndog,human,Dog\n"))

    word_labels_import(path=write(tmp_path, "word,super_category,labels\ndog,animal,Dog\n"))

    assert WordLabel.objects.get(name="dog").super_category == "animal"
    assert WordLabel.objects.count() == 1


HEADER_AND_GOOD_ROW = "word,super_category,labels\nsiren,alarm,Siren\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("word,labels\ndog,Dog\n", "missing column(s) super_category"),
        (HEADER_AND_GOOD_ROW + "dog,pets,Dog\n", "line 3: super_category 'pets'"),
        (HEADER_AND_GOOD_ROW + "dog,animal,Doggo\n", "line 3: unknown AudioSet label(s)"),
        (HEADER_AND_GOOD_ROW + ",animal,Dog\n", "line 3: empty word"),
    ],
)
def test_it_rejects_a_bad_word_label_file_and_changes_nothing(
    ontology: None, tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ValidationError) as error:
        word_labels_import(path=write(tmp_path, text))

    assert message in error.value.messages[0]
    assert not WordLabel.objects.exists()


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16"])
def test_it_says_a_utf16_word_label_file_is_utf16(
    ontology: None, tmp_path: Path, encoding: str
) -> None:
    path = tmp_path / "words.csv"
    path.write_bytes(HEADER_AND_GOOD_ROW.encode(encoding))

    with pytest.raises(ValidationError) as error:
        word_labels_import(path=path)

    assert error.value.messages[0].startswith("words.csv: the file is UTF-16 (little-endian, ")
    assert "save it as UTF-8" in error.value.messages[0]
    assert not WordLabel.objects.exists()


def test_it_reports_a_bad_file_from_the_command(ontology: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="super_category 'pets'"):
        call_command(
            "import_word_labels",
            str(write(tmp_path, "word,super_category,labels\ndog,pets,Dog\n")),
            stdout=io.StringIO(),
        )
