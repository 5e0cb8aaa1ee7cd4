"""Migration 0007: the flags that sat on the shared ontology become every project's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = ("curation", "0006_clip_video_features")
AFTER = ("curation", "0008_label_curation_off_the_ontology")


def _with_other_apps_at_their_latest(
    executor: MigrationExecutor, node: tuple[str, str]
) -> list[tuple[str, str]]:
    """`node`, and every other app at its latest migration that needs nothing of `node`'s
    app past `node` (a later migration of another app may depend on a later one of this
    app: migrating to its leaf would apply those too)."""
    graph = executor.loader.graph
    allowed = {n for n in graph.forwards_plan(node) if n[0] == node[0]}

    def fits(target: tuple[str, str]) -> bool:
        return all(n[0] != node[0] or n in allowed for n in graph.forwards_plan(target))

    targets = []
    for app in {leaf[0] for leaf in graph.leaf_nodes()} - {node[0]}:
        candidates = [n for n in graph.nodes if n[0] == app and fits(n)]
        if candidates:
            targets.append(max(candidates, key=lambda n: len(graph.forwards_plan(n))))
    return [*targets, node]


@pytest.fixture
def back_to_the_latest_schema() -> Iterator[None]:
    """Later tests share this database: they need every migration applied again, the ones
    after AFTER included."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("back_to_the_latest_schema")
def test_it_copies_todays_global_flags_to_every_existing_project() -> None:
    executor = MigrationExecutor(connection)
    before = _with_other_apps_at_their_latest(executor, BEFORE)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    Project, Label = old.get_model("core", "Project"), old.get_model("curation", "Label")
    Project.objects.create(name="Sounds", slug="sounds")
    Project.objects.create(name="Birds", slug="birds")
    Label.objects.create(mid="/m/siren", name="Siren", excluded=True, curation_note="police?")
    Label.objects.create(mid="/m/dog", name="Dog", needs_visuals=True)
    Label.objects.create(mid="/m/cat", name="Cat")

    executor = MigrationExecutor(connection)  # a fresh loader sees BEFORE as applied
    after = _with_other_apps_at_their_latest(executor, AFTER)
    executor.migrate(after)

    new = executor.loader.project_state(after).apps
    rows = new.get_model("curation", "LabelCuration").objects.values_list(
        "project__slug", "label__mid", "excluded", "needs_visuals", "note"
    )
    assert sorted(rows) == [
        ("birds", "/m/dog", False, True, ""),
        ("birds", "/m/siren", True, False, "police?"),
        ("sounds", "/m/dog", False, True, ""),
        ("sounds", "/m/siren", True, False, "police?"),
    ]
