"""ontology_import (curation.services.ontology): AudioSet's ontology.json into Label rows
and a tree."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from curation.models import Label
from curation.services import ontology_import
from tests.conftest import ONTOLOGY_EXCERPT

pytestmark = pytest.mark.django_db


def _entries() -> list[dict[str, Any]]:
    return json.loads(ONTOLOGY_EXCERPT.read_text(encoding="utf-8"))


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _snapshot() -> tuple[list[tuple[Any, ...]], list[tuple[str, str]]]:
    labels = list(
        Label.objects.order_by("mid").values_list("mid", "name", "abstract", "blacklisted")
    )
    edges = sorted(Label.children.through.objects.values_list("from_label__mid", "to_label__mid"))
    return labels, edges


def _names(queryset: Any) -> set[str]:
    return set(queryset.values_list("name", flat=True))


@pytest.fixture
def imported() -> dict[str, int]:
    return ontology_import(path=ONTOLOGY_EXCERPT)


def test_it_creates_one_label_per_class(imported: dict[str, int]) -> None:
    entries = _entries()
    assert imported == {
        "classes": len(entries),
        "created": len(entries),
        "updated": 0,
        "unchanged": 0,
    }
    assert set(Label.objects.values_list("mid", flat=True)) == {e["id"] for e in entries}


def test_it_links_children_to_their_parents(imported: dict[str, int]) -> None:
    dog = Label.objects.get(mid="/m/0bt9lr")
    assert _names(dog.children) == {"Bark"}
    assert _names(dog.parents) == {"Domestic animals, pets"}
    chirp = Label.objects.get(mid="/m/07pggtn")
    assert _names(chirp.parents) == {"Bird vocalization, bird call, bird song", "Brief tone"}
    assert not chirp.children.exists()


def test_it_stores_every_edge_of_the_file(imported: dict[str, int]) -> None:
    expected = sorted((e["id"], child) for e in _entries() for child in e.get("child_ids", []))
    assert _snapshot()[1] == expected


def test_it_flags_abstract_and_blacklisted_classes_from_restrictions(
    imported: dict[str, int],
) -> None:
    entries = _entries()
    abstract = {e["id"] for e in entries if "abstract" in e.get("restrictions", [])}
    blacklisted = {e["id"] for e in entries if "blacklist" in e.get("restrictions", [])}
    assert abstract
    assert blacklisted
    assert set(Label.objects.filter(abstract=True).values_list("mid", flat=True)) == abstract
    assert set(Label.objects.filter(blacklisted=True).values_list("mid", flat=True)) == blacklisted
    speech = Label.objects.get(mid="/m/09x0r")
    assert (speech.abstract, speech.blacklisted) == (False, False)


def test_it_reports_progress_until_done() -> None:
    calls: list[tuple[int, int | None, str]] = []

    def progress(done: int, total: int | None = None, message: str = "") -> None:
        calls.append((done, total, message))

    ontology_import(path=ONTOLOGY_EXCERPT, progress=progress)
    done, total, message = calls[-1]
    assert done == total
    assert total >= len(_entries())
    assert message


def test_it_changes_nothing_when_imported_twice(imported: dict[str, int]) -> None:
    before = _snapshot()
    again = ontology_import(path=ONTOLOGY_EXCERPT)
    assert again == {
        "classes": imported["classes"],
        "created": 0,
        "updated": 0,
        "unchanged": imported["classes"],
    }
    assert _snapshot() == before


def test_it_updates_a_renamed_class_on_reimport(imported: dict[str, int], tmp_path: Path) -> None:
    entries = _entries()
    for entry in entries:
        if entry["id"] == "/m/0bt9lr":
            entry["name"] = "Dog (domestic)"
    result = ontology_import(path=_write(tmp_path / "ontology.json", entries))
    assert result["created"] == 0
    assert result["updated"] == 1
    assert result["unchanged"] == len(entries) - 1
    dog = Label.objects.get(mid="/m/0bt9lr")
    assert dog.name == "Dog (domestic)"
    assert _names(dog.children) == {"Bark"}


def test_it_replaces_the_children_of_a_class_on_reimport(
    imported: dict[str, int], tmp_path: Path
) -> None:
    entries = _entries()
    for entry in entries:
        if entry["id"] == "/m/07pp_mv":  # Alarm: Telephone, Siren -> Siren only
            entry["child_ids"] = ["/m/03kmc9"]
    ontology_import(path=_write(tmp_path / "ontology.json", entries))
    alarm = Label.objects.get(mid="/m/07pp_mv")
    assert _names(alarm.children) == {"Siren"}
    assert not Label.objects.get(mid="/m/07cx4").parents.exists()


def _not_a_list(entries: list[dict[str, Any]]) -> Any:
    return {"classes": entries}


def _missing_name(entries: list[dict[str, Any]]) -> Any:
    del entries[3]["name"]
    return entries


def _duplicate_id(entries: list[dict[str, Any]]) -> Any:
    entries[4]["id"] = entries[2]["id"]
    return entries


def _unknown_child(entries: list[dict[str, Any]]) -> Any:
    entries[5]["child_ids"] = ["/m/05tny_", "/m/nowhere"]
    return entries


@pytest.mark.parametrize(
    ("mangle", "fragments"),
    [
        pytest.param(_not_a_list, ["expected a JSON list"], id="not-a-list"),
        pytest.param(_missing_name, ["entry 3", "/m/0jbk", "missing 'name'"], id="missing-name"),
        pytest.param(_duplicate_id, ["entry 4", "/m/09x0r", "appears twice"], id="duplicate-id"),
        pytest.param(_unknown_child, ["/m/0bt9lr", "/m/nowhere"], id="unknown-child"),
    ],
)
def test_it_rejects_a_malformed_file_naming_file_and_entry(
    imported: dict[str, int],
    tmp_path: Path,
    mangle: Callable[[list[dict[str, Any]]], Any],
    fragments: list[str],
) -> None:
    entries = _entries()
    # valid changes beside the fault: none of them may be stored either
    entries[0]["name"] = "Renamed, must not be stored"
    entries.append({"id": "/m/new", "name": "New, must not be stored"})
    path = _write(tmp_path / "mangled_ontology.json", mangle(entries))
    before = _snapshot()

    with pytest.raises(ValidationError) as raised:
        ontology_import(path=path)

    message = "; ".join(raised.value.messages)
    assert "mangled_ontology.json" in message
    for fragment in fragments:
        assert fragment in message
    assert _snapshot() == before


def _children(entries: list[dict[str, Any]], mid: str, children: list[str]) -> None:
    next(entry for entry in entries if entry["id"] == mid)["child_ids"] = children


def test_it_refuses_a_tree_with_a_cycle_naming_its_classes(
    imported: dict[str, int], tmp_path: Path
) -> None:
    entries = _entries()
    _children(entries, "/m/05tny_", ["/m/0jbk"])  # Bark becomes a parent of Animal
    entries[0]["name"] = "Renamed, must not be stored"
    before = _snapshot()

    with pytest.raises(ValidationError) as raised:
        ontology_import(path=_write(tmp_path / "looping.json", entries))

    assert raised.value.messages == [
        "looping.json: the parent/child links form a cycle: /m/0jbk (Animal) → /m/068hy "
        "(Domestic animals, pets) → /m/0bt9lr (Dog) → /m/05tny_ (Bark) → /m/0jbk (Animal); "
        "a class cannot be its own ancestor — nothing was imported."
    ]
    assert _snapshot() == before


def test_it_refuses_a_class_that_is_its_own_child(tmp_path: Path) -> None:
    entries = _entries()
    _children(entries, "/m/09x0r", ["/m/05zppz", "/m/09x0r"])

    with pytest.raises(ValidationError, match=r"cycle: /m/09x0r \(Speech\) → /m/09x0r \(Speech\);"):
        ontology_import(path=_write(tmp_path / "ontology.json", entries))
    assert not Label.objects.exists()


def test_it_rejects_a_file_that_is_not_json(imported: dict[str, int], tmp_path: Path) -> None:
    path = tmp_path / "truncated.json"
    path.write_text(ONTOLOGY_EXCERPT.read_text(encoding="utf-8")[:500], encoding="utf-8")
    before = _snapshot()

    with pytest.raises(ValidationError, match=r"truncated\.json: not valid JSON"):
        ontology_import(path=path)
    assert _snapshot() == before


def test_it_rejects_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="no such file"):
        ontology_import(path=tmp_path / "absent.json")
    assert not Label.objects.exists()


@pytest.mark.shared_data
def test_it_imports_the_full_audioset_ontology(shared_data: Path) -> None:
    path = shared_data / "audioset" / "ontology.json"
    entries = json.loads(path.read_text(encoding="utf-8"))
    abstract = sum("abstract" in e.get("restrictions", []) for e in entries)
    blacklisted = sum("blacklist" in e.get("restrictions", []) for e in entries)
    assert (len(entries), abstract, blacklisted) == (632, 23, 67)

    result = ontology_import(path=path)

    assert result["created"] == len(entries)
    assert Label.objects.count() == len(entries)
    assert Label.objects.filter(abstract=True).count() == abstract
    assert Label.objects.filter(blacklisted=True).count() == blacklisted
    edges = sum(len(e.get("child_ids", [])) for e in entries)
    assert Label.children.through.objects.count() == edges
