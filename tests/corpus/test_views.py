"""Corpus pages: snapshots are the researchers' (403 for reviewers and annotators, 404 for
outsiders and for versions of another project); statistics are read by researchers and
reviewers. Every URL of corpus.urls is in the access table."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, reverse

from core.models import Job, Project
from core.services import job_run
from corpus import urls as corpus_urls
from corpus.models import CorpusImport, CorpusStatistics, Snapshot
from corpus.services import captions_import, snapshot_build, snapshot_create, statistics_compute
from corpus.services import statistics as statistics_services
from tests.conftest import login, streamed
from tests.corpus.conftest import AUDIOCAPS, CLOTHO, clip_with_audio, crowd_caption


@dataclass
class World:
    project: Project
    snapshot: Snapshot
    statistics: CorpusStatistics  # of the project's corpus now
    snapshot_statistics: CorpusStatistics


@pytest.fixture(autouse=True)
def no_pos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        statistics_services, "_pos_pipeline", lambda: (None, "needs a spaCy pipeline (test)")
    )


@pytest.fixture
def world(imported: CorpusImport) -> World:
    project = imported.project
    snapshot = snapshot_build(
        snapshot=snapshot_create(project=project, fmt="audiocaps", text="raw", splits=["train"])
    )
    return World(
        project=project,
        snapshot=snapshot,
        statistics=statistics_compute(project=project),
        snapshot_statistics=snapshot.statistics.get(),
    )


URL = Callable[[World], str]


def _s(name: str, *rest: Any) -> URL:
    return lambda w: reverse(name, args=[w.project.slug, w.snapshot.version, *rest])


# name -> (method, URL, roles allowed besides researchers)
PAGES: dict[str, tuple[str, URL, tuple[str, ...]]] = {
    "snapshot_list": ("get", lambda w: reverse("snapshot_list", args=[w.project.slug]), ()),
    "snapshot_new": ("post", lambda w: reverse("snapshot_new", args=[w.project.slug]), ()),
    "snapshot_detail": ("get", _s("snapshot_detail"), ()),
    "snapshot_download": ("get", _s("snapshot_download"), ()),
    "snapshot_file": ("get", _s("snapshot_file", "train.csv"), ()),
    "corpus_statistics": (
        "get",
        lambda w: reverse("corpus_statistics", args=[w.project.slug]),
        ("reviewer",),
    ),
    "corpus_statistics_compute": (
        "post",
        lambda w: reverse("corpus_statistics_compute", args=[w.project.slug]),
        (),
    ),
    "corpus_statistics_chart": (
        "get",
        lambda w: reverse(
            "corpus_statistics_chart", args=[w.project.slug, w.statistics.pk, "lengths"]
        ),
        ("reviewer",),
    ),
}


def test_every_corpus_url_is_in_the_access_table() -> None:
    names = {p.name for p in corpus_urls.urlpatterns if isinstance(p, URLPattern)}

    assert names == set(PAGES)


@pytest.mark.parametrize("name", list(PAGES))
def test_anonymous_visitors_are_sent_to_log_in(world: World, name: str) -> None:
    method, url, _ = PAGES[name]

    response = getattr(Client(), method)(url(world))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", list(PAGES))
def test_outsiders_get_404(world: World, olive: Any, name: str) -> None:
    method, url, _ = PAGES[name]

    assert getattr(login(olive), method)(url(world)).status_code == 404


@pytest.mark.parametrize("who", ["rey", "ann"])
@pytest.mark.parametrize("name", list(PAGES))
def test_other_roles_get_403_where_they_have_no_business(
    world: World, request: pytest.FixtureRequest, who: str, name: str
) -> None:
    method, url, allowed = PAGES[name]
    role = {"rey": "reviewer", "ann": "annotator"}[who]

    response = getattr(login(request.getfixturevalue(who)), method)(url(world))

    assert response.status_code == (200 if role in allowed else 403)


def test_a_version_of_another_project_is_404(world: World, olive: Any) -> None:
    birds = Project.objects.get(slug="birds")
    captions_import(project=birds, path=AUDIOCAPS, fmt="audiocaps", split="train")
    snapshot_build(
        snapshot=snapshot_create(project=birds, fmt="jsonl", text="raw", splits=["train"])
    )
    mine = snapshot_create(project=world.project, fmt="jsonl", text="raw", splits=["train"])

    response = login(olive).get(reverse("snapshot_detail", args=["birds", mine.version]))

    assert response.status_code == 404


def test_the_list_offers_the_form_and_lists_snapshots(world: World, alice: Any) -> None:
    response = login(alice).get(reverse("snapshot_list", args=["sounds"]))

    assert response.status_code == 200
    assert b'data-testid="snapshot-form"' in response.content
    assert b">v1</a>" in response.content


def test_a_researcher_starts_a_snapshot_built_by_a_job(imported: CorpusImport, alice: Any) -> None:
    response = login(alice).post(
        reverse("snapshot_new", args=["sounds"]),
        {"format": "jsonl", "text": "raw", "splits": ["train", "test"]},
    )

    snapshot = Snapshot.objects.get()
    assert response.status_code == 302
    assert response["Location"] == snapshot.get_absolute_url()
    assert (snapshot.state, snapshot.splits, snapshot.created_by) == (
        "building",
        ["train", "test"],
        alice,
    )
    job = snapshot.job
    assert job is not None
    assert job.kind == "snapshot_build"
    assert job.state == Job.State.QUEUED
    job_run(job_id=job.pk)
    snapshot.refresh_from_db()
    assert snapshot.state == Snapshot.State.READY
    assert snapshot.counts["train"] == {"clips": 4, "captions": 5}


def test_a_snapshot_that_cannot_be_made_is_explained_on_the_form(
    project: Project, alice: Any
) -> None:
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    response = login(alice).post(
        reverse("snapshot_new", args=["sounds"]),
        {"format": "audiocaps", "text": "raw", "splits": ["train"]},
    )

    assert response.status_code == 200
    assert b"belong to local clips" in response.content
    assert not Snapshot.objects.exists()


def test_a_refused_snapshot_is_an_announced_styled_error(project: Project, alice: Any) -> None:
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    response = login(alice).post(
        reverse("snapshot_new", args=["sounds"]),
        {"format": "audiocaps", "text": "raw", "splits": ["train"]},
    )

    assert b'<ul class="errorlist nonfield" role="alert"><li>' in response.content


def test_the_form_starts_on_a_format_local_clips_export_in(project: Project, alice: Any) -> None:
    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    response = login(alice).get(reverse("snapshot_list", args=["sounds"]))

    assert response.context["form"]["format"].value() == Snapshot.Format.CLOTHO
    assert b'<option value="clotho" selected>' in response.content


def test_the_form_starts_on_audiocaps_for_youtube_clips(imported: CorpusImport, alice: Any) -> None:
    response = login(alice).get(reverse("snapshot_list", args=["sounds"]))

    assert response.context["form"]["format"].value() == Snapshot.Format.AUDIOCAPS


def test_posting_needs_the_csrf_token(imported: CorpusImport, alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    response = client.post(
        reverse("snapshot_new", args=["sounds"]),
        {"format": "jsonl", "text": "raw", "splits": ["train"]},
    )

    assert response.status_code == 403
    assert not Snapshot.objects.exists()


def test_the_detail_page_lists_files_with_checksums(world: World, alice: Any) -> None:
    response = login(alice).get(world.snapshot.get_absolute_url())

    assert response.status_code == 200
    entry = world.snapshot.files[0]
    assert str(entry["sha256"]).encode() in response.content
    assert b'data-testid="download"' in response.content
    assert b'data-testid="statistics-table"' in response.content


def test_the_archive_downloads_as_a_zip(world: World, alice: Any) -> None:
    response = login(alice).get(reverse("snapshot_download", args=["sounds", 1]))

    data = streamed(response)
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="sounds-v1-audiocaps-raw.zip"'
    assert zipfile.ZipFile(io.BytesIO(data)).read("train.csv") == AUDIOCAPS.read_bytes()


def test_one_file_downloads_on_its_own(world: World, alice: Any) -> None:
    response = login(alice).get(reverse("snapshot_file", args=["sounds", 1, "train.csv"]))

    assert response.status_code == 200
    assert streamed(response) == AUDIOCAPS.read_bytes()


def test_the_statistics_page_draws_its_charts_inline_without_storing_images(
    world: World, rey: Any
) -> None:
    html = login(rey).get(reverse("corpus_statistics", args=["sounds"])).content.decode()

    world.statistics.refresh_from_db()
    lengths = html.split('data-testid="length-chart">', 1)[1].split("</figure>", 1)[0]
    assert lengths.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="chart"')
    assert 'aria-label="Histogram of words per caption (mean' in lengths
    assert "<rect x=" in lengths
    assert 'aria-label="Bar chart: clips per AudioSet label' in html
    assert not world.statistics.length_chart
    assert not world.statistics.label_chart


def test_an_unknown_file_is_404(world: World, alice: Any) -> None:
    response = login(alice).get(reverse("snapshot_file", args=["sounds", 1, "settings.py"]))

    assert response.status_code == 404


def test_a_building_snapshot_shows_its_progress_and_has_no_download(
    world: World, alice: Any
) -> None:
    building = snapshot_create(project=world.project, fmt="jsonl", text="raw", splits=["train"])
    client = login(alice)

    assert (
        client.get(reverse("snapshot_download", args=["sounds", building.version])).status_code
        == 404
    )
    assert b'data-testid="state">Building' in client.get(building.get_absolute_url()).content


def test_the_statistics_page_shows_the_tables(world: World, rey: Any) -> None:
    response = login(rey).get(reverse("corpus_statistics", args=["sounds"]))

    assert response.status_code == 200
    assert b'data-split="train"' in response.content
    assert b"needs a spaCy pipeline (test)" in response.content
    assert b'data-testid="compute"' not in response.content  # reviewers do not recompute


def test_a_researcher_recomputes_statistics_as_a_job(world: World, alice: Any) -> None:
    response = login(alice).post(
        reverse("corpus_statistics_compute", args=["sounds"]), {"snapshot": "1"}
    )

    job = Job.objects.get(kind="corpus_statistics")
    assert response["Location"] == job.get_absolute_url()
    assert job.params == {"project_id": world.project.pk, "snapshot_id": world.snapshot.pk}
    job_run(job_id=job.pk)
    assert world.snapshot.statistics.count() == 2


def test_the_chart_is_a_png(world: World, rey: Any) -> None:
    response = login(rey).get(
        reverse("corpus_statistics_chart", args=["sounds", world.statistics.pk, "labels"])
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"


def test_a_snapshots_chart_is_for_researchers(world: World, rey: Any) -> None:
    url = reverse(
        "corpus_statistics_chart", args=["sounds", world.snapshot_statistics.pk, "lengths"]
    )

    assert login(rey).get(url).status_code == 403


def test_the_project_page_links_snapshots_for_researchers_only(
    project: Project, alice: Any, rey: Any
) -> None:
    link = reverse("snapshot_list", args=["sounds"]).encode()
    statistics = reverse("corpus_statistics", args=["sounds"]).encode()

    researcher = login(alice).get(project.get_absolute_url()).content
    reviewer = login(rey).get(project.get_absolute_url()).content

    assert link in researcher
    assert link not in reviewer
    assert statistics in reviewer


def test_a_researcher_asks_for_the_audio_and_a_licence(
    project: Project, alice: Any, ann: Any
) -> None:
    clip, _ = clip_with_audio(seconds=0.1, seed=1, youtube_id="AAAAAAAAAAA", start=30)
    crowd_caption(project, ann, "a dog barks twice", split="train", clip=clip)
    crowd_caption(project, ann, "rain on a roof", split="train")  # a clip never fetched
    client = login(alice)

    client.post(
        reverse("snapshot_new", args=["sounds"]),
        {
            "format": "jsonl",
            "text": "raw",
            "splits": ["train"],
            "with_audio": "on",
            "licence": "cc0-1.0",
        },
    )

    snapshot = Snapshot.objects.get()
    assert (snapshot.with_audio, snapshot.licence) == (True, "cc0-1.0")
    assert snapshot.job is not None
    job_run(job_id=snapshot.job.pk)
    page = client.get(snapshot.get_absolute_url()).content.decode()
    assert "1 WAV files, audiofolder layout" in page
    assert 'data-testid="missing-audio">1 clip had no readable audio' in page
    nested = client.get(reverse("snapshot_file", args=["sounds", 1, "train/metadata.jsonl"]))
    assert nested["Content-Type"] == "application/json; charset=utf-8"
    assert b'"file_name": "AAAAAAAAAAA_30.wav"' in streamed(nested)
    card = client.get(reverse("snapshot_file", args=["sounds", 1, "README.md"]))
    assert b'license: "cc0-1.0"' in streamed(card)
