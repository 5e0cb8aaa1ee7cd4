from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from curation.models import Label, WordLabel
from curation.services import label_curate, ontology_import, word_labels_import
from tests.conftest import ONTOLOGY_EXCERPT

DEMO_WORDS = ONTOLOGY_EXCERPT.parent / "word_labels_demo.csv"


@pytest.fixture
def ontology(db: None) -> None:
    ontology_import(path=ONTOLOGY_EXCERPT)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "words.csv"
    path.write_text(text)
    return path


def test_it_records_a_researchers_flags_and_note(ontology: None) -> None:
    label = Label.objects.get(name="Siren")

    label_curate(
        label=label,
        needs_visuals=True,
        needs_expertise=False,
        excluded=False,
        note="  ambulance or police? ",
    )

    label.refresh_from_db()
    assert (label.needs_visuals, label.needs_expertise, label.excluded) == (True, False, False)
    assert label.curation_note == "ambulance or police?"


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


def test_it_reports_a_bad_file_from_the_command(ontology: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="super_category 'pets'"):
        call_command(
            "import_word_labels",
            str(write(tmp_path, "word,super_category,labels\ndog,pets,Dog\n")),
            stdout=io.StringIO(),
        )
