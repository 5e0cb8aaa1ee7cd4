"""Corpus API: snapshots (list, create, status, download) for researchers, statistics for
researchers and reviewers; 401 without a token, 404 for outsiders, 403 for other roles."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
from django.test import Client

from core.models import Job, Project
from core.services import api_token_create, job_run
from corpus.models import CorpusImport, Snapshot
from corpus.services import statistics as statistics_services
from tests.conftest import streamed
from tests.corpus.conftest import AUDIOCAPS, CLOTHO

JSON = "application/json"
BASE = "/api/projects/sounds"


@pytest.fixture(autouse=True)
def no_pos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        statistics_services, "_pos_pipeline", lambda: (None, "needs a spaCy pipeline (test)")
    )


def api(user: Any) -> Client:
    _, raw = api_token_create(user=user, name="script")
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def create(client: Client, **body: Any) -> Any:
    return client.post(f"{BASE}/snapshots", json.dumps(body), content_type=JSON)


@pytest.fixture
def ready(imported: CorpusImport, alice: Any) -> Snapshot:
    response = create(api(alice), format="audiocaps", splits=["train"])
    job_run(job_id=response.json()["job"]["id"])
    return Snapshot.objects.get()


def test_a_script_creates_a_snapshot_and_follows_it(imported: CorpusImport, alice: Any) -> None:
    client = api(alice)

    response = create(client, format="jsonl", text="raw", splits=["val", "train"])

    body = response.json()
    assert response.status_code == 202
    assert (body["version"], body["state"], body["splits"]) == (1, "building", ["train", "val"])
    assert body["job"]["kind"] == "snapshot_build"
    assert body["download_url"] is None
    job_run(job_id=body["job"]["id"])
    status = client.get(f"{BASE}/snapshots/1").json()
    assert status["state"] == "ready"
    assert status["counts"]["train"] == {"clips": 4, "captions": 5}
    assert status["manifest"]["files"] == status["files"]
    assert status["download_url"] == f"{BASE}/snapshots/1/download"


def test_it_lists_snapshots(ready: Snapshot, alice: Any) -> None:
    body = api(alice).get(f"{BASE}/snapshots").json()

    assert [(s["version"], s["state"], s["format"]) for s in body] == [(1, "ready", "audiocaps")]


def test_the_archive_and_single_files_download(ready: Snapshot, alice: Any) -> None:
    client = api(alice)

    archive = client.get(f"{BASE}/snapshots/1/download")
    single = client.get(f"{BASE}/snapshots/1/download", {"file": "train.csv"})

    zipped = zipfile.ZipFile(io.BytesIO(streamed(archive)))
    assert zipped.read("train.csv") == AUDIOCAPS.read_bytes()
    assert streamed(single) == AUDIOCAPS.read_bytes()
    assert single["Content-Disposition"] == 'attachment; filename="train.csv"'


def test_an_unknown_file_is_404(ready: Snapshot, alice: Any) -> None:
    response = api(alice).get(f"{BASE}/snapshots/1/download", {"file": "../../etc/passwd"})

    assert response.status_code == 404


def test_a_snapshot_still_building_is_not_downloadable(imported: CorpusImport, alice: Any) -> None:
    client = api(alice)
    create(client, format="jsonl")

    response = client.get(f"{BASE}/snapshots/1/download")

    assert response.status_code == 409
    assert response.json()["detail"] == "Snapshot v1 is building."


def test_an_export_it_cannot_make_is_400_with_the_reason(project: Project, alice: Any) -> None:
    from corpus.services import captions_import

    captions_import(project=project, path=CLOTHO, fmt="clotho", split="train")

    response = create(api(alice), format="audiocaps")

    assert response.status_code == 400
    assert "belong to local clips" in response.json()["detail"]
    assert not Snapshot.objects.exists()


def test_an_unknown_version_is_404(imported: CorpusImport, alice: Any) -> None:
    assert api(alice).get(f"{BASE}/snapshots/7").status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/snapshots"),
        ("post", "/snapshots"),
        ("get", "/snapshots/1"),
        ("get", "/snapshots/1/download"),
        ("get", "/statistics"),
        ("post", "/statistics"),
    ],
)
def test_access(ready: Snapshot, olive: Any, rey: Any, ann: Any, method: str, path: str) -> None:
    def call(client: Client) -> int:
        if method == "get":
            return client.get(BASE + path).status_code
        body = json.dumps({"format": "jsonl"} if "snapshots" in path else {})
        return client.post(BASE + path, body, content_type=JSON).status_code

    reviewer_reads = method == "get" and path == "/statistics"
    assert call(Client()) == 401
    assert call(api(olive)) == 404
    assert call(api(ann)) == 403
    assert call(api(rey)) == (404 if reviewer_reads else 403)  # none computed yet: 404


def test_statistics_are_computed_by_a_job_then_read(
    imported: CorpusImport, alice: Any, rey: Any
) -> None:
    client = api(alice)
    assert client.get(f"{BASE}/statistics").status_code == 404

    response = client.post(f"{BASE}/statistics", "{}", content_type=JSON)

    assert response.status_code == 202
    job_run(job_id=response.json()["id"])
    assert Job.objects.get().state == Job.State.SUCCEEDED
    body = api(rey).get(f"{BASE}/statistics").json()
    assert body["snapshot"] is None
    assert body["data"]["all"]["captions"] == 5
    assert body["data"]["pos_unavailable"] == "needs a spaCy pipeline (test)"
    assert body["length_chart_url"].endswith("/lengths.png")


def test_a_snapshots_statistics_are_readable(ready: Snapshot, alice: Any) -> None:
    body = api(alice).get(f"{BASE}/statistics", {"snapshot": 1}).json()

    assert body["snapshot"] == 1
    assert body["data"]["splits"]["train"]["tokens"] == 30


def test_a_script_asks_for_the_audio_and_reads_what_was_left_out(
    imported: CorpusImport, alice: Any
) -> None:
    client = api(alice)

    response = create(client, format="clotho", splits=["train"], with_audio=True)

    body = response.json()
    assert (body["with_audio"], body["licence"]) == (True, "cc-by-4.0")
    job_run(job_id=body["job"]["id"])
    status = client.get(f"{BASE}/snapshots/1").json()
    assert status["state"] == "ready"
    assert status["missing_audio"] == 4  # the imported clips were never fetched
    assert [f["path"] for f in status["extra_files"]] == [
        "clotho_metadata_development.csv",
        "missing_audio.csv",
        "README.md",
    ]
    missing = client.get(f"{BASE}/snapshots/1/download", {"file": "missing_audio.csv"})
    assert streamed(missing).decode().count("no audio stored (the clip is pending)") == 4


def test_an_unknown_licence_is_400(imported: CorpusImport, alice: Any) -> None:
    response = create(api(alice), format="jsonl", with_audio=True, licence="gpl-3.0")

    assert response.status_code == 400
    assert response.json()["detail"].startswith("Unknown licence 'gpl-3.0'; use one of cc-by-4.0")
