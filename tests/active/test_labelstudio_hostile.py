"""The Label Studio endpoints and import under hostile input (issue 32, Why 2 and 5):
captions through the one text gate with the refusal seen on both sides, bounded JSON
answered 400 naming the field, duplicate ids answered once, deletes in a few statements
without the project's lock, the subset following skips and deletes, the retrain setting
obeyed, one answer for a wrong secret and a missing project, and no Basic-auth challenge."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from active.models import LabelStudioRefusal, Retrain
from active.services import approved_caption_count, labelstudio_import, project_config
from annotation.models import Batch, Caption
from core.throttling import token_prefix
from curation.models import Clip, SubsetClip
from tests.active.test_labelstudio import LS_PROJECT, _annotated, _client, _hook, _ls_captions
from tests.active.test_labelstudio_projects import _annotation, _export, _exported_task

pytestmark = pytest.mark.django_db

HOSTILE_CAPTIONS = [
    '=HYPERLINK("http://evil.example","x") a dog barks',
    "@SUM(1+1) a dog barks",
    "\u2002=1+1 a dog barks loudly",
    "a <b>dog</b> barks",
    "a dog \u202ebarks",
]


def _ls_subset_clips() -> set[int]:
    return set(
        SubsetClip.objects.filter(subset__slug__contains="label-studio").values_list(
            "clip_id", flat=True
        )
    )


@pytest.mark.parametrize("text", HOSTILE_CAPTIONS)
def test_a_hostile_caption_from_the_webhook_is_refused_and_shown(
    batch: Batch, clips: list[Clip], alice: Any, text: str
) -> None:
    response = _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], text))
    assert response.status_code == 400  # Label Studio logs the reason phrase
    assert "not stored: a caption" in response.reason_phrase
    refusal = LabelStudioRefusal.objects.get()
    assert (refusal.annotation, refusal.clip_id) == (17, clips[0].pk)
    assert not _ls_captions()
    page = Client()
    page.force_login(alice)
    assert escape(refusal.reason) in page.get("/projects/sounds/active/").content.decode()


@pytest.mark.parametrize("text", HOSTILE_CAPTIONS)
def test_a_hostile_caption_in_an_import_stops_it(
    batch: Batch, clips: list[Clip], alice: Any, text: str
) -> None:
    data = _export(_exported_task(41, clips[0], [_annotation(17, text)]))
    with pytest.raises(Exception, match="nothing was imported"):
        labelstudio_import(project=batch.project, data=data, file_name="e.json", user=alice)
    assert not _ls_captions()


def _raw_hook(project: Any, body: str) -> Any:
    secret = project_config(project=project).labelstudio_secret
    return Client().post(
        f"/labelstudio/{project.slug}/{secret}/webhook", body, content_type="application/json"
    )


def test_an_id_of_ten_to_the_300_is_a_400_naming_the_field(batch: Batch, clips: list[Clip]) -> None:
    payload = _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks")
    body = json.dumps(payload).replace('"id": 17', '"id": 1' + "0" * 300)
    response = _raw_hook(batch.project, body)
    assert response.status_code == 400
    assert "annotation.id is a number of 301 characters" in response.reason_phrase


def test_an_id_over_the_database_integer_is_a_400(batch: Batch, clips: list[Clip]) -> None:
    payload = _annotated("ANNOTATION_CREATED", 2**63, clips[0], "a dog barks")
    response = _raw_hook(batch.project, json.dumps(payload))
    assert response.status_code == 400
    assert "The annotation's id must be an integer id from 1 to" in response.reason_phrase


def test_a_number_of_4301_digits_to_predict_is_a_400(project: Any, alice: Any) -> None:
    body = '{"tasks": [{"id": ' + "9" * 4301 + ', "data": {}}]}'
    response = _client(alice).post(
        "/labelstudio/sounds/predict", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "tasks[0].id is a number of 4,301 characters" in response.reason_phrase


def test_json_nested_100000_deep_is_a_400(batch: Batch) -> None:
    response = _raw_hook(batch.project, '{"action": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert response.status_code == 400
    assert "nests deeper than" in response.reason_phrase


def test_an_import_of_millions_of_objects_is_refused_before_parsing(
    batch: Batch, alice: Any
) -> None:
    data = b"[" + b"{}," * 2_500_001 + b"{}]"
    with pytest.raises(Exception, match="JSON values; an export of"):
        labelstudio_import(project=batch.project, data=data, file_name="junk.json", user=alice)


def test_duplicate_ids_are_answered_once(batch: Batch, clips: list[Clip], alice: Any) -> None:
    task = _exported_task(41, clips[0], [_annotation(17, "a dog barks")])
    data = _export(task, task)  # the same annotation listed twice
    outcome = labelstudio_import(project=batch.project, data=data, file_name="e.json", user=alice)
    assert outcome.created == 1
    payload = {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 17}, {"id": 17}, 17],
               "project": LS_PROJECT}  # fmt: skip
    response = _hook(batch.project, payload)
    assert response.status_code == 201
    assert response.json()["result"]["captions"] == {"deleted": 1}


def test_deleting_many_annotations_takes_a_few_statements_and_no_project_lock(
    batch: Batch, clips: list[Clip]
) -> None:
    for n in range(30):
        _hook(batch.project, _annotated("ANNOTATION_CREATED", 100 + n, clips[n % 4], "a dog barks"))
    payload = {"action": "ANNOTATIONS_DELETED", "annotations": list(range(100, 2100)),
               "project": LS_PROJECT}  # fmt: skip
    with CaptureQueriesContext(connection) as queries:
        response = _hook(batch.project, payload)
    assert response.json()["result"]["captions"] == {"deleted": 30}
    assert len(queries) < 60
    assert not any("FOR UPDATE" in q["sql"] for q in queries)


def test_a_deleted_annotation_takes_its_clip_out_of_the_subset(
    batch: Batch, clips: list[Clip]
) -> None:
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks"))
    assert _ls_subset_clips() == {clips[0].pk}
    _hook(batch.project, {"action": "ANNOTATIONS_DELETED", "annotations": [17],
                          "project": LS_PROJECT})  # fmt: skip
    assert _ls_subset_clips() == set()


def test_a_skipped_annotation_takes_its_clip_out_of_the_subset(
    batch: Batch, clips: list[Clip], alice: Any
) -> None:
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks"))
    _hook(batch.project, _annotated("ANNOTATION_UPDATED", 17, clips[0], was_cancelled=True))
    assert _ls_subset_clips() == set()
    labelstudio_import(
        project=batch.project,
        data=_export(_exported_task(44, clips[1], [_annotation(18, "rain on a roof")])),
        file_name="a.json",
        user=alice,
    )
    skipped = _exported_task(44, clips[1], [_annotation(18, was_cancelled=True)])
    other = _exported_task(45, clips[2], [_annotation(19, "a car passes")])
    labelstudio_import(
        project=batch.project, data=_export(skipped, other), file_name="b.json", user=alice
    )
    assert _ls_subset_clips() == {clips[2].pk}
    assert [c[2] for c in _ls_captions()] == ["a car passes"]


def test_annotations_start_no_retrain_while_retraining_on_growth_is_off(
    batch: Batch, clips: list[Clip], settings: Any
) -> None:
    settings.ACTIVE_RETRAIN_MIN_NEW_CAPTIONS = 1
    config = project_config(project=batch.project)
    assert not config.auto_retrain
    response = _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks"))
    assert response.json()["result"]["retrain"] is None
    assert not Retrain.objects.exists()


def test_a_wrong_secret_and_a_missing_project_answer_alike(project: Any) -> None:
    body = json.dumps({"action": "START_TRAINING"})
    wrong = Client().post("/labelstudio/sounds/guess/webhook", body, "application/json")
    missing = Client().post("/labelstudio/no-such/guess/webhook", body, "application/json")
    assert (wrong.status_code, wrong.reason_phrase, wrong.content) == (
        missing.status_code,
        missing.reason_phrase,
        missing.content,
    )


def test_a_refusal_sends_no_basic_auth_challenge(project: Any) -> None:
    response = Client().get("/labelstudio/sounds/health")
    assert response.status_code == 401
    assert "WWW-Authenticate" not in response


def test_the_caption_stays_out_of_the_corpus_count_when_refused(
    batch: Batch, clips: list[Clip]
) -> None:
    before = Caption.objects.count()
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "@SUM(1) dog barks"))
    assert Caption.objects.count() == before


def test_label_studio_captions_wait_in_the_review_queue(
    batch: Batch, clips: list[Clip], rey: Any
) -> None:
    before = approved_caption_count(batch.project)
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks loudly"))
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 18, clips[1], "rain falls softly"))
    assert approved_caption_count(batch.project) == before  # not approved at once
    reviewer = Client()
    reviewer.force_login(rey)
    page = reviewer.get("/projects/sounds/review/").content.decode()
    assert "a dog barks loudly" in page
    assert "rain falls softly" in page
    first, second = Caption.objects.filter(pending_review=True).order_by("external_id")
    reviewer.post(f"/projects/sounds/review/imported/{first.pk}/approve/")
    reviewer.post(f"/projects/sounds/review/imported/{second.pk}/reject/")
    assert approved_caption_count(batch.project) == before + 1
    assert [c[2] for c in _ls_captions()] == ["a dog barks loudly"]


def test_an_updated_label_studio_caption_is_reviewed_again(
    batch: Batch, clips: list[Clip], rey: Any
) -> None:
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks loudly"))
    caption = Caption.objects.get()
    caption.pending_review = False
    caption.save()
    _hook(batch.project, _annotated("ANNOTATION_UPDATED", 17, clips[0], "two dogs bark loudly"))
    caption.refresh_from_db()
    assert caption.pending_review


def test_bad_tokens_from_the_same_address_never_lock_label_studio_out(
    project: Any, alice: Any, settings: Any
) -> None:
    settings.API_RATE_BAD_TOKENS = "5/hour"
    for i in range(40):
        Client(HTTP_AUTHORIZATION=f"Bearer emk_{i:08d}-stale").get("/labelstudio/sounds/health")
    assert _client(alice).get("/labelstudio/sounds/health").status_code == 200


def test_bad_tokens_sharing_label_studios_token_prefix_never_refuse_it(
    project: Any, alice: Any, settings: Any
) -> None:
    settings.API_RATE_BAD_TOKENS = "5/hour"
    label_studio = _client(alice)
    raw = label_studio.defaults["HTTP_AUTHORIZATION"].removeprefix("Bearer ")
    for i in range(6):  # guesses that share the real token's first characters
        Client(HTTP_AUTHORIZATION=f"Bearer {token_prefix(raw)}-guess{i}").get(
            "/labelstudio/sounds/health"
        )
    assert label_studio.get("/labelstudio/sounds/health").status_code == 200
