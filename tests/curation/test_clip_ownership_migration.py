"""curation 0008: the clips and imported captions of before ownership get their owners,
and a project that shared another's clip keeps its rows on a copy of its own."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

from annotation.models import Caption, HitClip
from curation.models import Clip, SubsetClip

OWNERS = ("curation", "0008_clips_and_captions_to_their_projects")


def _before_owners() -> list[tuple[str, str]]:
    """Targets that leave every migration applied but curation 0008 and what depends on it.
    Migrating to a node rolls back all its children in its app, so a target is a kept node
    whose children in its app all depend on 0008 (migrations merged beside 0008 stay)."""
    graph = MigrationLoader(connection).graph
    after = set(graph.backwards_plan(OWNERS))  # 0008 and everything that depends on it
    return [
        node
        for node in graph.nodes
        if node not in after
        and all(
            child.key in after for child in graph.node_map[node].children if child.key[0] == node[0]
        )
    ]


def _migrate(to: list[tuple[str, str]] | None = None) -> Any:
    """Migrates to `to` (the latest migrations without it); returns the models there."""
    executor = MigrationExecutor(connection)
    targets = to or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


class _Rows:
    """Rows made through the migration's historical models."""

    def __init__(self, apps: Any) -> None:
        self.apps = apps
        self.user = apps.get_model("auth", "User").objects.create(username="alice")

    def model(self, name: str) -> Any:
        app = {
            "Project": "core",
            "Clip": "curation",
            "Subset": "curation",
            "SubsetClip": "curation",
            "Batch": "annotation",
            "Hit": "annotation",
            "HitClip": "annotation",
            "Assignment": "annotation",
            "Caption": "annotation",
            "CorpusImport": "corpus",
        }[name]
        return self.apps.get_model(app, name)

    def project(self, slug: str) -> Any:
        return self.model("Project").objects.create(name=slug, slug=slug, created_by=self.user)

    def subset(self, project: Any, clips: list[Any], *, imported: bool = False) -> Any:
        subset = self.model("Subset").objects.create(
            project=project, name=f"{project.slug} subset", slug=f"s{project.pk}-{imported}"
        )
        for clip in clips:
            self.model("SubsetClip").objects.create(subset=subset, clip=clip, split="train")
        if imported:
            self.model("CorpusImport").objects.create(
                project=project, subset=subset, format="audiocaps", split="train",
                file_name="x.csv", sha256="0" * 64, rows=1, clips_created=1,
                captions_created=1, captions_existing=0,
            )  # fmt: skip
        return subset

    def crowd_caption(self, subset: Any, clip: Any, text: str) -> Any:
        now = timezone.now()
        batch = self.model("Batch").objects.create(
            project=subset.project, subset=subset, split="train", name="b", captions_per_clip=1,
            clips_per_hit=1, reward_cents=1, time_allotted=timedelta(minutes=5),
            lifetime=timedelta(days=1), created_by=self.user,
        )  # fmt: skip
        hit = self.model("Hit").objects.create(batch=batch, max_assignments=1, taken=1)
        self.model("HitClip").objects.create(hit=hit, clip=clip, position=0)
        assignment = self.model("Assignment").objects.create(
            hit=hit, worker=self.user, state="approved", accepted_at=now - timedelta(hours=1),
            deadline=now, submitted_at=now,
        )  # fmt: skip
        return self.model("Caption").objects.create(assignment=assignment, clip=clip, text=text)

    def imported_caption(self, clip: Any, external_id: str) -> Any:
        return self.model("Caption").objects.create(
            provenance="imported", clip=clip, text=f"caption {external_id}", external_id=external_id
        )


@pytest.fixture(scope="module")
def made(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """Rows made before curation 0008 through its historical models, then migrated once
    for every test here (migrating takes seconds); emptied afterwards."""
    with django_db_blocker.unblock():
        try:
            rows = _Rows(_migrate(_before_owners()))
            sounds, birds, cats = (rows.project(slug) for slug in ("sounds", "birds", "cats"))
            shared = rows.model("Clip").objects.create(
                source="local", original_name="dawn.wav", content_sha256="a" * 64, audio="a.wav"
            )
            label = rows.apps.get_model("curation", "Label").objects.create(mid="/m/x", name="X")
            shared.labels.add(label)
            first, second = rows.subset(sounds, [shared]), rows.subset(birds, [shared])
            segment = rows.model("Clip").objects.create(
                source="youtube", youtube_id="AAAAAAAAAAA", start_seconds=30, end_seconds=40
            )
            rows.subset(sounds, [segment], imported=True)
            rows.subset(birds, [segment], imported=True)
            rows.subset(cats, [segment])  # selected the segment, imported nothing
            nowhere = rows.model("Clip").objects.create(
                source="youtube", youtube_id="BBBBBBBBBBB", start_seconds=0, end_seconds=10
            )
            made = {
                "sounds": sounds.pk,
                "birds": birds.pk,
                "cats": cats.pk,
                "shared": shared.pk,
                "first": first.pk,
                "second": second.pk,
                "ours": rows.crowd_caption(first, shared, "ours").pk,
                "theirs": rows.crowd_caption(second, shared, "theirs").pk,
                "stray": rows.model("Clip").objects.create(source="local").pk,
                "segment": segment.pk,
                "imported": rows.imported_caption(segment, "101").pk,
                "orphan": rows.imported_caption(nowhere, "102").pk,
            }
            _migrate()
            yield made
        finally:
            _migrate()
            call_command("flush", interactive=False, verbosity=0)


pytestmark = pytest.mark.django_db


def test_a_local_clip_two_projects_shared_stays_with_the_first(made: dict[str, Any]) -> None:
    original = Clip.objects.get(pk=made["shared"])

    assert original.project_id == made["sounds"]
    assert SubsetClip.objects.get(subset_id=made["first"]).clip_id == original.pk
    assert Caption.objects.get(pk=made["ours"]).clip_id == original.pk


def test_the_second_project_gets_a_copy_of_the_shared_clip_with_its_rows(
    made: dict[str, Any],
) -> None:
    copy = Clip.objects.get(project_id=made["birds"], source=Clip.Source.LOCAL)

    assert copy.pk != made["shared"]
    # the same stored file: storage may be shared, rows never
    assert (copy.original_name, copy.content_sha256, copy.audio.name) == (
        "dawn.wav",
        "a" * 64,
        "a.wav",
    )
    assert [label.mid for label in copy.labels.all()] == ["/m/x"]
    assert SubsetClip.objects.get(subset_id=made["second"]).clip_id == copy.pk
    assert Caption.objects.get(pk=made["theirs"]).clip_id == copy.pk
    assert HitClip.objects.get(hit__batch__project_id=made["birds"]).clip_id == copy.pk


def test_a_local_clip_no_project_holds_stays_site_wide(made: dict[str, Any]) -> None:
    assert Clip.objects.get(pk=made["stray"]).project is None


def test_an_imported_caption_goes_to_each_project_that_imported_its_clip(
    made: dict[str, Any],
) -> None:
    assert Caption.objects.get(pk=made["imported"]).imported_into_id == made["sounds"]
    copy = Caption.objects.exclude(pk=made["imported"]).get(external_id="101")
    assert (copy.imported_into_id, copy.clip_id, copy.text) == (
        made["birds"],
        made["segment"],
        "caption 101",
    )
    assert not Caption.objects.filter(imported_into_id=made["cats"]).exists()


def test_an_imported_caption_no_project_reached_is_deleted(made: dict[str, Any]) -> None:
    assert not Caption.objects.filter(pk=made["orphan"]).exists()


def test_audioset_segments_stay_site_wide(made: dict[str, Any]) -> None:
    assert Clip.objects.get(pk=made["segment"]).project is None
