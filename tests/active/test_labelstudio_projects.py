"""A batch exported as a Label Studio project (labelling config and tasks with Earmark
audio URLs), and Label Studio's JSON export imported back as captions: checked whole
before anything is written, errors naming the task."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any
from xml.etree import ElementTree

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from active.services import labelstudio_import, project_config, textarea_names
from active.services.labelstudio import IMPORT_MAX_BYTES
from annotation.models import Batch, Caption
from core.models import Project
from core.services import api_token_create
from corpus.models import CorpusImport
from corpus.queries import approved_captions
from curation.models import Clip
from modeling.models import TrainingRun
from tests.active.conftest import suggest
from tests.annotation.factories import make_clips, make_subset
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _exported_task(
    task_id: int, clip: Clip | int | None, annotations: list[dict[str, Any]]
) -> dict[str, Any]:
    """A task of Label Studio 1.23's JSON export (ExportDataSerializer), trimmed."""
    clip_id = clip.pk if isinstance(clip, Clip) else clip
    data: dict[str, Any] = {"audio": "https://elsewhere.test/a.wav"}
    if clip_id is not None:
        data = {
            "audio": f"http://testserver/projects/sounds/clips/{clip_id}/audio",
            "clip_id": clip_id,
        }
    return {"id": task_id, "annotations": annotations, "drafts": [], "predictions": [],
            "data": data, "meta": {}, "created_at": "2026-11-20T10:00:00.000000Z",
            "updated_at": "2026-11-20T10:05:00.000000Z", "inner_id": task_id,
            "total_annotations": len(annotations), "cancelled_annotations": 0,
            "total_predictions": 0, "comment_count": 0, "unresolved_comment_count": 0,
            "last_comment_updated_at": None, "project": 3, "updated_by": 1,
            "comment_authors": [], "file_upload": "tasks.json"}  # fmt: skip


def _annotation(annotation_id: int, *texts: str, **fields: Any) -> dict[str, Any]:
    result = [{"id": f"r{annotation_id}", "type": "textarea", "value": {"text": list(texts)},
               "origin": "manual", "to_name": "audio", "from_name": "caption"}]  # fmt: skip
    return {"id": annotation_id, "completed_by": 1, "result": result, "was_cancelled": False,
            "ground_truth": False, "created_at": "2026-11-20T10:04:00.000000Z",
            "updated_at": "2026-11-20T10:04:00.000000Z", "lead_time": 9.1, "task": 41,
            "project": 3, "updated_by": 1, "parent_prediction": None,
            "parent_annotation": None, **fields}  # fmt: skip


def _export(*tasks: dict[str, Any]) -> bytes:
    return json.dumps(list(tasks)).encode()


def _upload(client: Client, data: bytes, name: str = "project-3-at-2026-11-25.json") -> Any:
    upload = SimpleUploadedFile(name, data, content_type="application/json")
    return client.post("/projects/sounds/active/labelstudio/import/", {"file": upload})


def _captions() -> list[tuple[int, str, str]]:
    rows = Caption.objects.filter(external_id__startswith="label-studio/").order_by("external_id")
    return list(rows.values_list("clip_id", "external_id", "text"))


# Export --------------------------------------------------------------------------------


def test_a_batch_downloads_as_a_label_studio_project(
    batch: Batch, clips: list[Clip], rey: Any
) -> None:
    response = login(rey).get(f"/projects/sounds/batches/{batch.pk}/active/labelstudio.zip")
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        f'attachment; filename="labelstudio-sounds-batch-{batch.pk}.zip"'
    )
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert sorted(archive.namelist()) == ["README.txt", "label_config.xml", "tasks.json"]
    config = archive.read("label_config.xml").decode()
    root = ElementTree.fromstring(config)
    assert root.find("Audio").attrib["value"] == "$audio"  # type: ignore[union-attr]
    assert textarea_names(config) == ("caption", "audio")
    tasks = json.loads(archive.read("tasks.json"))
    assert tasks == [
        {"data": {"audio": f"http://testserver/projects/sounds/clips/{c.pk}/audio",
                  "clip_id": c.pk, "earmark_project": "sounds", "earmark_batch": batch.pk,
                  "split": "val"}}
        for c in sorted(clips, key=lambda c: c.pk)
    ]  # fmt: skip


def test_the_batch_page_offers_the_download(batch: Batch, alice: Any) -> None:
    page = login(alice).get(batch.get_absolute_url()).content.decode()
    assert f"/projects/sounds/batches/{batch.pk}/active/labelstudio.zip" in page


def test_who_may_download_a_batch_as_a_label_studio_project(
    batch: Batch, ann: Any, olive: Any
) -> None:
    url = f"/projects/sounds/batches/{batch.pk}/active/labelstudio.zip"
    assert login(ann).get(url).status_code == 403
    assert login(olive).get(url).status_code == 404


def test_the_api_exports_what_the_ml_backend_then_reads(
    batch: Batch, clips: list[Clip], alice: Any, promoted: TrainingRun
) -> None:
    suggest(promoted, clips[2], "birds sing at dawn")
    _, raw = api_token_create(user=alice, name="script")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    exported = client.get(f"/api/projects/sounds/batches/{batch.pk}/labelstudio").json()
    assert len(exported["tasks"]) == 4
    # Label Studio numbers the imported tasks and sends them back to /predict
    tasks = [{"id": n, **task} for n, task in enumerate(exported["tasks"], start=1)]
    payload = {"tasks": tasks, "label_config": exported["label_config"]}
    results = client.post(
        "/labelstudio/sounds/predict", json.dumps(payload), content_type="application/json"
    ).json()["results"]
    position = sorted(c.pk for c in clips).index(clips[2].pk)
    assert results[position]["result"][0]["value"] == {"text": ["birds sing at dawn"]}


# Import --------------------------------------------------------------------------------


def test_label_studios_json_export_comes_back_as_captions(
    batch: Batch, clips: list[Clip], alice: Any
) -> None:
    data = _export(
        _exported_task(41, clips[0], [_annotation(17, "a dog barks"), _annotation(18, "woof")]),
        _exported_task(42, clips[1], []),  # not labelled yet
        _exported_task(43, clips[2], [_annotation(19, was_cancelled=True)]),  # skipped
    )
    response = _upload(login(alice), data)
    assert response.status_code == 302
    assert _captions() == [
        (clips[0].pk, "label-studio/3/17#1", "a dog barks"),
        (clips[0].pk, "label-studio/3/18#1", "woof"),
    ]
    record = CorpusImport.objects.get(format="label-studio")
    assert (record.file_name, record.split, record.rows, record.captions_created) == (
        "project-3-at-2026-11-25.json",
        "val",
        2,
        2,
    )
    assert len(record.sha256) == 64
    # waiting for a reviewer, as crowd captions do
    assert approved_captions(batch.project, "val").filter(provenance="imported").count() == 0
    assert Caption.objects.filter(pending_review=True).count() == 2


def test_importing_again_replaces_and_never_repeats(
    batch: Batch, clips: list[Clip], alice: Any
) -> None:
    first = _export(_exported_task(41, clips[0], [_annotation(17, "a dog barks")]))
    again = _export(
        _exported_task(41, clips[0], [_annotation(17, "two dogs bark")]),
        _exported_task(44, clips[3], [_annotation(20, "rain on a roof")]),
    )

    def counts(data: bytes) -> tuple[int, int, int]:
        outcome = labelstudio_import(
            project=batch.project, data=data, file_name="e.json", user=alice
        )
        return outcome.created, outcome.updated, outcome.unchanged

    assert counts(first) == (1, 0, 0)
    assert counts(again) == (1, 1, 0)
    assert counts(again) == (0, 0, 2)
    assert _captions() == [
        (clips[0].pk, "label-studio/3/17#1", "two dogs bark"),
        (clips[3].pk, "label-studio/3/20#1", "rain on a roof"),
    ]


def test_an_annotation_the_webhook_stored_is_not_imported_twice(
    batch: Batch, clips: list[Clip], alice: Any
) -> None:
    secret = project_config(project=batch.project).labelstudio_secret
    hook = {"action": "ANNOTATION_CREATED", "annotation": _annotation(17, "a dog barks"),
            "task": _exported_task(41, clips[0], []),
            "project": {"id": 3, "label_config": ""}}  # fmt: skip
    Client().post(
        f"/labelstudio/sounds/{secret}/webhook", json.dumps(hook), content_type="application/json"
    )
    data = _export(_exported_task(41, clips[0], [_annotation(17, "a dog barks")]))
    outcome = labelstudio_import(project=batch.project, data=data, file_name="a.json", user=alice)
    assert (outcome.created, outcome.unchanged) == (0, 1)
    assert len(_captions()) == 1


def test_a_malformed_task_stops_the_import_naming_it(
    batch: Batch, clips: list[Clip], alice: Any, olive: Any
) -> None:
    theirs = make_clips(1)[0]
    make_subset(Project.objects.get(slug="birds"), [theirs])
    data = _export(
        _exported_task(41, clips[0], [_annotation(17, "a dog barks")]),
        _exported_task(42, theirs, [_annotation(18, "a bird")]),
        _exported_task(43, None, [_annotation(19, "rain")]),
        _exported_task(44, clips[1], [_annotation(20, "x" * 501)]),
        _exported_task(45, clips[2], [{"id": 21, "result": "rain"}]),
        "not a task",  # type: ignore[arg-type]
    )
    client = login(alice)
    page = client.get(_upload(client, data)["Location"]).content.decode()
    assert f"tasks[1] (Label Studio task 42), annotations[0]: clip {theirs.pk} is not in" in page
    assert "tasks[2] (Label Studio task 43), annotations[0]: its task names no Earmark clip" in page
    assert "tasks[3] (Label Studio task 44), annotations[0]: a caption is longer than 500" in page
    assert "tasks[4] (Label Studio task 45), annotations[0]: The annotation&#x27;s" in page
    assert "tasks[5] is not an object" in page
    assert "nothing was imported" in page
    assert not _captions()  # not even tasks[0]'s
    assert not CorpusImport.objects.exists()


def test_a_caption_with_a_nul_or_a_line_break_stops_the_import_naming_it(
    batch: Batch, clips: list[Clip], alice: Any
) -> None:
    data = _export(
        _exported_task(41, clips[0], [_annotation(17, "a dog barks")]),
        _exported_task(42, clips[1], [_annotation(18, "a dog\x00 barks")]),
        _exported_task(43, clips[2], [_annotation(19, "rain falls\non a roof")]),
    )
    client = login(alice)
    page = client.get(_upload(client, data)["Location"]).content.decode()
    assert (
        "tasks[1] (Label Studio task 42), annotations[0]: a caption contains a control "
        "character (U+0000); please remove it" in page
    )
    assert (
        "tasks[2] (Label Studio task 43), annotations[0]: a caption contains a line break; "
        "write the caption on one line" in page
    )
    assert not _captions()  # not even tasks[0]'s
    assert not CorpusImport.objects.exists()


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("export.csv", b"id,caption\n", "is not a .json file"),
        ("export.json", b"{not json", "is not JSON"),
        ("export.json", b'{"tasks": []}', "top level must be a list of tasks"),
        ("export.json", b"[]", "no task has a caption"),
    ],
)
def test_an_upload_that_is_not_an_export_is_refused(
    project: Project, alice: Any, name: str, data: bytes, message: str
) -> None:
    client = login(alice)
    page = client.get(_upload(client, data, name)["Location"]).content.decode()
    assert message in page


def test_an_upload_over_the_limit_is_refused_unread(
    project: Project, alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import active.services.labelstudio as module

    monkeypatch.setattr(module, "IMPORT_MAX_BYTES", 2**20)
    client = login(alice)
    page = client.get(_upload(client, b" " * (2**20 + 1))["Location"]).content.decode()
    assert "is larger than 1 MB" in page
    assert IMPORT_MAX_BYTES == 100 * 2**20


def test_only_researchers_import(project: Project, rey: Any) -> None:
    assert _upload(login(rey), b"[]").status_code == 403


def test_the_api_imports_an_export(batch: Batch, clips: list[Clip], alice: Any) -> None:
    _, raw = api_token_create(user=alice, name="script")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    data = _export(_exported_task(41, clips[0], [_annotation(17, "a dog barks")]))
    upload = SimpleUploadedFile("export.json", data, content_type="application/json")
    response = client.post("/api/projects/sounds/labelstudio/import", {"file": upload})
    assert response.status_code == 201
    assert response.json() == {"tasks": 1, "annotations": 1, "created": 1, "updated": 0,
                               "unchanged": 0, "skipped_tasks": 0}  # fmt: skip
    bad = SimpleUploadedFile("export.json", b"{", content_type="application/json")
    refused = client.post("/api/projects/sounds/labelstudio/import", {"file": bad})
    assert refused.status_code == 400
    assert "is not JSON" in refused.json()["detail"]
