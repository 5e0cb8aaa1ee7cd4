"""The Label Studio ML-backend endpoints take Label Studio's documented payloads
(label-studio-ml-backend's label_studio_ml/api.py) and answer in its shapes; Earmark API
tokens authenticate them (Bearer, or the basic-auth password Label Studio sends)."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import pytest
from django.test import Client

from active.labelstudio import REASON_MAX_CHARS, reason_phrase
from active.models import LabelStudioRefusal, Retrain
from active.services import project_config, run_promote_if_better
from annotation.models import Batch, Caption
from core.models import Job, Project
from core.services import api_token_create
from corpus.queries import approved_captions
from crowd.services import imported_caption_review
from curation.models import Clip
from modeling.models import TrainingRun
from tests.active.conftest import suggest
from tests.annotation.factories import make_clips, make_subset
from tests.conftest import login
from tests.modeling.factories import make_run

pytestmark = pytest.mark.django_db

LABEL_CONFIG = """<View>
  <Audio name="audio" value="$audio"/>
  <TextArea name="caption" toName="audio" rows="2" editable="true" maxSubmissions="1"/>
</View>"""


# The "project" object Label Studio 1.23 puts into a webhook call (its project serializer,
# trimmed to the fields Earmark reads and a few it ignores)
LS_PROJECT = {"id": 3, "title": "Everyday sounds", "label_config": LABEL_CONFIG,
              "created_at": "2026-11-20T10:00:00.000000Z", "expert_instruction": ""}  # fmt: skip


def _annotated(
    action: str, annotation_id: int, clip: Clip | None, *texts: str, **annotation: Any
) -> dict[str, Any]:
    """An ANNOTATION_CREATED/UPDATED webhook call as Label Studio 1.23 sends it (its
    annotation and task serializers; fields Earmark ignores trimmed)."""
    audio = f"https://earmark.test/projects/sounds/clips/{clip.pk}/audio" if clip else "a.wav"
    result = [{"id": "r1", "type": "textarea", "value": {"text": list(texts)}, "origin": "manual",
               "to_name": "audio", "from_name": "caption"}]  # fmt: skip
    fields = {"id": annotation_id, "result": result, "was_cancelled": False,
              "ground_truth": False, "completed_by": 1, "task": 41, "project": 3,
              "lead_time": 12.5}  # fmt: skip
    task = {"id": 41, "data": {"audio": audio}, "meta": {}, "is_labeled": True, "overlap": 1,
            "inner_id": 1, "total_annotations": 1, "project": 3}  # fmt: skip
    return {"action": action, "annotation": {**fields, **annotation}, "task": task,
            "project": LS_PROJECT}  # fmt: skip


def _ls_captions() -> list[tuple[int, str, str]]:
    rows = Caption.objects.filter(external_id__startswith="label-studio/").order_by("external_id")
    return list(rows.values_list("clip_id", "external_id", "text"))


def _secret(project: Any) -> str:
    return str(project_config(project=project).labelstudio_secret)


def _hook(project: Any, payload: Any, secret: str | None = None) -> Any:
    """Label Studio's webhook call as it sends it: a JSON POST without credentials."""
    url = f"/labelstudio/{project.slug}/{secret or _secret(project)}/webhook"
    return Client().post(url, json.dumps(payload), content_type="application/json")


def _client(user: Any, basic: bool = False) -> Client:
    _, raw = api_token_create(user=user, name="label studio")
    if basic:
        header = "Basic " + base64.b64encode(f"labelstudio:{raw}".encode()).decode()
    else:
        header = f"Bearer {raw}"
    return Client(HTTP_AUTHORIZATION=header)


def _post(client: Client, url: str, data: Any) -> Any:
    return client.post(url, json.dumps(data), content_type="application/json")


def test_health_answers_up(project: Any, alice: Any) -> None:
    response = _client(alice).get("/labelstudio/sounds/health")
    assert response.status_code == 200
    assert response.json() == {"status": "UP", "model_class": "EarmarkCaptioner"}


def test_setup_returns_the_model_version(project: Any, alice: Any, promoted: TrainingRun) -> None:
    payload = {"project": "3.1712345678", "schema": LABEL_CONFIG, "hostname": "http://ls:8080",
               "access_token": "ls-token", "model_version": None}  # fmt: skip
    response = _post(_client(alice, basic=True), "/labelstudio/sounds/setup", payload)
    assert response.status_code == 200
    assert response.json() == {"model_version": f"earmark-run-{promoted.pk}"}


def test_predict_returns_textarea_predictions_in_task_order(
    batch: Batch, clips: list[Clip], alice: Any, promoted: TrainingRun
) -> None:
    suggest(promoted, clips[0], "a dog barks twice")
    suggest(promoted, clips[1], "rain falls on a roof")
    payload = {
        "tasks": [
            {"id": 11, "data": {"audio": f"https://earmark.test/projects/sounds/clips/{clips[1].pk}/audio"}},
            {"id": 12, "data": {"audio": "https://elsewhere.test/a.wav"}},
            {"id": 13, "data": {"clip_id": clips[0].pk, "audio": "x.wav"}},
        ],
        "model_version": None,
        "project": "3.1712345678",
        "label_config": LABEL_CONFIG,
        "params": {"login": None, "password": None, "context": None},
    }  # fmt: skip

    response = _post(_client(alice), "/labelstudio/sounds/predict", payload)

    assert response.status_code == 200
    results = response.json()["results"]
    version = f"earmark-run-{promoted.pk}"
    assert results[0]["result"] == [
        {"from_name": "caption", "to_name": "audio", "type": "textarea",
         "value": {"text": ["rain falls on a roof"]}},
    ]  # fmt: skip
    assert 0 < results[0]["score"] <= 1
    assert results[0]["model_version"] == version
    assert results[1] == {"result": [], "score": None, "model_version": version}
    assert results[2]["result"][0]["value"] == {"text": ["a dog barks twice"]}


def test_predict_never_reads_another_projects_clips(
    batch: Batch, clips: list[Clip], alice: Any, olive: Any, promoted: TrainingRun
) -> None:
    suggest(promoted, clips[0], "a dog barks twice")
    payload = {"tasks": [{"id": 1, "data": {"clip_id": clips[0].pk}}], "label_config": LABEL_CONFIG}
    response = _post(_client(olive), "/labelstudio/birds/predict", payload)
    assert response.status_code == 200
    assert response.json()["results"][0]["result"] == []


def test_predict_names_what_is_wrong_with_a_bad_payload(project: Any, alice: Any) -> None:
    client = _client(alice)
    bad_json = client.post("/labelstudio/sounds/predict", "{", content_type="application/json")
    assert bad_json.status_code == 400
    assert "not JSON" in bad_json.json()["error"]
    no_tasks = _post(client, "/labelstudio/sounds/predict", {"tasks": "all"})
    assert no_tasks.status_code == 400
    assert '"tasks" must be a list' in no_tasks.json()["error"]
    no_textarea = _post(
        client,
        "/labelstudio/sounds/predict",
        {"tasks": [], "label_config": "<View><Audio name='a'/></View>"},
    )
    assert no_textarea.status_code == 400
    assert "no TextArea" in no_textarea.json()["error"]


def test_start_training_only_enqueues_a_debounced_retrain(project: Any, alice: Any) -> None:
    payload = {"action": "START_TRAINING", "project": {"id": 3, "label_config": LABEL_CONFIG}}
    client = _client(alice)
    first = _post(client, "/labelstudio/sounds/webhook", payload)
    second = _post(client, "/labelstudio/sounds/webhook", payload)
    assert first.status_code == second.status_code == 201
    assert first.json()["status"] == "ok"
    assert first.json()["result"] == second.json()["result"]
    retrain = Retrain.objects.get()
    assert retrain.trigger == Retrain.Trigger.LABEL_STUDIO
    assert Job.objects.get(kind="active_retrain").state == Job.State.QUEUED
    assert not TrainingRun.objects.exists()  # nothing trained inline


def test_a_read_only_token_cannot_start_training(project: Any, alice: Any) -> None:
    _, raw = api_token_create(user=alice, name="label studio", read_only=True)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    payload = {"action": "START_TRAINING", "project": {"id": 3, "label_config": LABEL_CONFIG}}
    response = _post(client, "/labelstudio/sounds/webhook", payload)
    assert response.status_code == 403
    assert "read-only" in response.json()["error"]
    assert not Retrain.objects.exists()
    assert client.get("/labelstudio/sounds/health").status_code == 200


def test_annotation_events_retrain_only_when_the_corpus_grew(project: Any, alice: Any) -> None:
    config = project_config(project=project)
    config.auto_retrain = True
    config.save()
    payload = {"action": "ANNOTATION_CREATED", "project": {"id": 3, "label_config": LABEL_CONFIG},
               "annotation": {"id": 1, "result": []}, "task": {"id": 1, "data": {}}}  # fmt: skip
    response = _post(_client(alice), "/labelstudio/sounds/webhook", payload)
    assert response.status_code == 201
    assert response.json()["result"] == {
        "retrain": None,
        "reason": "no new approved captions",
        "captions": {"clip_id": None},
    }
    assert not Retrain.objects.exists()


def test_an_unknown_event_is_acknowledged(project: Any, alice: Any) -> None:
    response = _post(_client(alice), "/labelstudio/sounds/webhook", {"action": "PROJECT_UPDATED"})
    assert response.status_code == 200
    assert response.json() == {"status": "Unknown event"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "health"),
        ("post", "setup"),
        ("post", "predict"),
        ("post", "webhook"),
        ("get", "versions"),
    ],
)
def test_who_may_call_the_endpoints(
    method: str, path: str, project: Any, ann: Any, olive: Any, rey: Any
) -> None:
    url = f"/labelstudio/sounds/{path}"
    body = {"tasks": [], "schema": LABEL_CONFIG, "action": "START_TRAINING"}
    anonymous = getattr(Client(), method)(url)
    assert anonymous.status_code == 401
    assert Client(HTTP_AUTHORIZATION="Bearer wrong").get(url).status_code in (401, 405)

    def call(user: Any) -> int:
        client = _client(user)
        if method == "get":
            return client.get(url).status_code
        return _post(client, url, body).status_code

    assert call(olive) == 404
    assert call(ann) == 403
    # reviewers may read predictions (Label Studio calls /health and /setup before each
    # prediction round, so they admit the same roles), not train
    assert call(rey) == (403 if path == "webhook" else 200)


def test_the_loop_page_says_what_to_set_in_label_studio(project: Any, alice: Any) -> None:
    page = login(alice).get("/projects/sounds/active/").content.decode()
    assert "ML_BLOCK_LOCAL_IP=false" in page
    assert "SSRF_PROTECTION_ENABLED=false" in page
    assert "Basic Authentication" in page
    assert "non-empty" in page
    assert "http://testserver/labelstudio/sounds" in page


def test_the_reason_phrase_carries_the_error_label_studio_shows(project: Any, alice: Any) -> None:
    # Label Studio reports a failed call as requests words it: "400 Client Error: <reason
    # phrase> for url: …"; the JSON body never reaches its user
    payload = {"project": "3.1712345678", "schema": "<View><Audio name='a'/></View>",
               "hostname": "http://ls:8080", "access_token": "ls"}  # fmt: skip
    response = _post(_client(alice, basic=True), "/labelstudio/sounds/setup", payload)
    assert response.status_code == 400
    assert response.reason_phrase == response.json()["error"]
    assert "no TextArea" in response.reason_phrase


def test_a_reason_phrase_is_one_bounded_line_of_ascii() -> None:
    phrase = reason_phrase("Caption “café”\r\nsays → " + "x" * 500)
    assert phrase.startswith('Caption "cafe" says -> xxx')
    assert phrase.isascii()
    assert phrase.isprintable()
    assert len(phrase) == REASON_MAX_CHARS
    assert phrase.endswith("...")
    assert reason_phrase("\n\t") == "Error"


def test_label_studios_own_webhook_is_let_in_by_the_urls_secret(project: Any) -> None:
    response = _hook(project, {"action": "START_TRAINING", "project": LS_PROJECT})
    assert response.status_code == 201
    retrain = Retrain.objects.select_related("job").get()
    assert retrain.trigger == Retrain.Trigger.LABEL_STUDIO
    assert retrain.job is not None
    assert retrain.job.created_by is None  # Label Studio, not a person


def test_a_webhook_with_a_wrong_secret_is_refused(project: Any) -> None:
    response = _hook(project, {"action": "START_TRAINING", "project": LS_PROJECT}, "guess")
    assert response.status_code == 404
    assert "rotated" in response.reason_phrase
    assert not Retrain.objects.exists()


def test_the_secret_url_still_needs_a_token_to_read_predictions(
    project: Any, alice: Any, promoted: TrainingRun
) -> None:
    url = f"/labelstudio/sounds/{_secret(project)}/predict"
    payload = {"tasks": [], "label_config": LABEL_CONFIG}
    assert _post(Client(), url, payload).status_code == 401
    assert _post(_client(alice, basic=True), url, payload).status_code == 200
    stale = _post(_client(alice, basic=True), "/labelstudio/sounds/old/predict", payload)
    assert stale.status_code == 404


def test_a_new_secret_retires_the_old_url(project: Any, alice: Any) -> None:
    old = _secret(project)
    response = login(alice).post("/projects/sounds/active/labelstudio/rotate/")
    assert response.status_code == 302
    new = _secret(project)
    assert new != old
    assert _hook(project, {"action": "PROJECT_UPDATED"}, old).status_code == 404
    assert _hook(project, {"action": "PROJECT_UPDATED"}, new).status_code == 200


def test_only_researchers_rotate_the_secret(project: Any, rey: Any) -> None:
    old = _secret(project)
    assert login(rey).post("/projects/sounds/active/labelstudio/rotate/").status_code == 403
    assert _secret(project) == old


def test_researchers_see_the_url_with_the_secret_reviewers_without(
    project: Any, alice: Any, rey: Any
) -> None:
    secret = _secret(project)
    mine = login(alice).get("/projects/sounds/active/").content.decode()
    assert f"http://testserver/labelstudio/sounds/{secret}<" in mine
    theirs = login(rey).get("/projects/sounds/active/").content.decode()
    assert secret not in theirs
    assert "http://testserver/labelstudio/sounds<" in theirs


def test_annotations_deleted_is_an_annotation_event(project: Any) -> None:
    # what Label Studio sends when annotations are deleted: plural, ids only
    payload = {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 17}], "project": LS_PROJECT}
    response = _hook(project, payload)
    assert response.status_code == 201
    assert response.json()["status"] == "ok"


def test_a_caption_written_in_label_studio_joins_the_corpus(
    batch: Batch, clips: list[Clip], rey: Any
) -> None:
    response = _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks"))
    assert response.status_code == 201
    assert response.json()["result"]["captions"] == {"clip_id": clips[0].pk, "created": 1}
    caption = Caption.objects.get(external_id="label-studio/3/17#1")
    assert (caption.provenance, caption.clip_id, caption.text) == (
        Caption.Provenance.IMPORTED,
        clips[0].pk,
        "a dog barks",
    )
    # it waits for a reviewer, as a crowd caption does; once approved it is in the corpus
    # retraining snapshots, in the split the clip has in the project
    assert caption.pending_review
    assert list(approved_captions(batch.project, "val")) == []
    imported_caption_review(
        project=batch.project, caption_id=caption.pk, reviewer=rey, approve=True
    )
    assert list(approved_captions(batch.project, "val")) == [caption]


def test_a_repeated_event_stores_nothing_twice(batch: Batch, clips: list[Clip]) -> None:
    payload = _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks")
    _hook(batch.project, payload)
    _hook(batch.project, payload)
    assert _ls_captions() == [(clips[0].pk, "label-studio/3/17#1", "a dog barks")]


def test_an_updated_annotation_replaces_its_captions(batch: Batch, clips: list[Clip]) -> None:
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks", "rain"))
    first = Caption.objects.get(external_id="label-studio/3/17#1")
    response = _hook(batch.project, _annotated("ANNOTATION_UPDATED", 17, clips[0], "two dogs bark"))
    assert response.json()["result"]["captions"] == {
        "clip_id": clips[0].pk,
        "updated": 1,
        "deleted": 1,
    }
    assert _ls_captions() == [(clips[0].pk, "label-studio/3/17#1", "two dogs bark")]
    assert Caption.objects.get(external_id="label-studio/3/17#1").pk == first.pk


def test_deleted_annotations_take_their_captions_along(batch: Batch, clips: list[Clip]) -> None:
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks"))
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 18, clips[1], "rain on a roof"))
    payload = {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 17}], "project": LS_PROJECT}
    response = _hook(batch.project, payload)
    assert response.json()["result"]["captions"] == {"deleted": 1}
    assert _ls_captions() == [(clips[1].pk, "label-studio/3/18#1", "rain on a roof")]


def test_an_annotation_on_another_projects_clip_stores_nothing(
    batch: Batch, project: Any, olive: Any
) -> None:
    theirs = make_clips(1)[0]
    make_subset(Project.objects.get(slug="birds"), [theirs])
    response = _hook(project, _annotated("ANNOTATION_CREATED", 17, theirs, "a dog barks"))
    assert response.status_code == 400
    reason = f"clip {theirs.pk} is not in this project"
    assert reason in response.reason_phrase
    assert LabelStudioRefusal.objects.get().reason == reason
    assert not _ls_captions()


def test_a_skipped_task_leaves_no_caption(batch: Batch, clips: list[Clip]) -> None:
    _hook(batch.project, _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks"))
    _hook(batch.project, _annotated("ANNOTATION_UPDATED", 17, clips[0], was_cancelled=True))
    assert not _ls_captions()


def test_a_malformed_annotation_is_refused_with_the_reason(batch: Batch, clips: list[Clip]) -> None:
    payload = _annotated("ANNOTATION_CREATED", 17, clips[0], "a dog barks")
    payload["annotation"]["result"] = "a dog barks"
    response = _hook(batch.project, payload)
    assert response.status_code == 400
    assert "must be a list" in response.reason_phrase


def _clip_one(project: Any) -> Clip:
    """The clip with id 1, in the project (what `true` would wrongly name)."""
    one = Clip.objects.filter(pk=1).first()
    if one is None:
        one = Clip.objects.create(
            pk=1, source=Clip.Source.YOUTUBE, youtube_id="ytclip00001", start_seconds=0,
            end_seconds=10, status=Clip.Status.READY, audio="clips/audio/fetched.wav",
        )  # fmt: skip
    if not one.subsets.filter(project=project).exists():
        make_subset(project, [one])
    return one


def test_odd_clip_ids_get_empty_results_and_the_others_their_predictions(
    batch: Batch, clips: list[Clip], alice: Any, promoted: TrainingRun
) -> None:
    one = _clip_one(batch.project)
    if one not in clips:
        suggest(promoted, one, "clip one speaks")
    suggest(promoted, clips[0], "a dog barks twice")
    suggest(promoted, clips[1], "rain falls on a roof")
    tasks = [
        {"id": 1, "data": {"clip_id": "²"}},
        {"id": 2, "data": {"clip_id": 2**63}},
        {"id": 3, "data": {"clip_id": True}},
        {"id": 4, "data": {"clip_id": float(clips[1].pk)}},  # a CSV import's 26.0
        {"id": 5, "data": {"clip_id": clips[0].pk}},
        {"id": 6, "data": {"audio": "https://earmark.test/clips/99999999999999999999999/audio"}},
        {"id": 7, "data": "not an object"},
        {"id": 8, "data": {"clip_id": f"{clips[0].pk}.0"}},
    ]
    payload = {"tasks": tasks, "label_config": LABEL_CONFIG, "project": "3.1712345678"}
    response = _post(_client(alice), "/labelstudio/sounds/predict", payload)
    assert response.status_code == 200
    texts = [
        r["result"][0]["value"]["text"][0] if r["result"] else None
        for r in response.json()["results"]
    ]
    assert texts == [
        None, None, None, "rain falls on a roof", "a dog barks twice", None, None,
        "a dog barks twice",
    ]  # fmt: skip


def _ls_task(task_id: int, clip_id: int) -> dict[str, Any]:
    """A task as Label Studio 1.23 sends it to /predict (its TaskSimpleSerializer)."""
    return {"id": task_id, "data": {"clip_id": clip_id, "audio": f"/data/{clip_id}.wav"},
            "meta": {}, "created_at": "2026-11-20T10:00:00.000000Z",
            "updated_at": "2026-11-20T10:00:00.000000Z", "is_labeled": False, "overlap": 1,
            "inner_id": task_id, "total_annotations": 0, "cancelled_annotations": 0,
            "total_predictions": 0, "comment_count": 0, "unresolved_comment_count": 0,
            "last_comment_updated_at": None, "project": 3, "updated_by": None,
            "file_upload": 2, "comment_authors": [], "annotations": [],
            "predictions": []}  # fmt: skip


def test_retrieve_predictions_for_a_thousand_and_one_tasks(
    batch: Batch,
    clips: list[Clip],
    alice: Any,
    promoted: TrainingRun,
    django_assert_max_num_queries: Any,
) -> None:
    suggest(promoted, clips[0], "a dog barks twice")
    tasks = [_ls_task(n, clips[n % 4].pk) for n in range(1001)]
    payload = {"tasks": tasks, "model_version": f"earmark-run-{promoted.pk}",
               "project": "3.1712345678", "label_config": LABEL_CONFIG,
               "params": {"login": None, "password": None, "context": None}}  # fmt: skip
    with django_assert_max_num_queries(20):  # read in chunks, not a query per task
        response = _post(_client(alice), "/labelstudio/sounds/predict", payload)
    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == 1001
    assert [bool(r["result"]) for r in results[:8]] == [True, False, False, False] * 2
    assert results[1000]["result"][0]["value"] == {"text": ["a dog barks twice"]}


def test_a_body_over_the_upload_limit_is_refused_naming_the_setting(
    project: Any, alice: Any, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    payload = {"tasks": [_ls_task(n, n + 1) for n in range(100)], "label_config": LABEL_CONFIG}
    response = _post(_client(alice), "/labelstudio/sounds/predict", payload)
    assert response.status_code == 413
    assert "UPLOAD_MAX_BYTES" in response.reason_phrase


def test_label_studio_keeps_the_old_version_until_a_new_run_has_suggested(
    batch: Batch, clips: list[Clip], alice: Any, promoted: TrainingRun, snapshot: Any
) -> None:
    suggest(promoted, clips[0], "a dog barks twice")
    better = make_run(batch.project, snapshot, metrics={"val": {"CIDEr-D": 0.9}})
    promoted.metrics = {"val": {"CIDEr-D": 0.1}}
    promoted.save(update_fields=["metrics"])
    assert run_promote_if_better(run=better).promoted
    client = _client(alice)
    setup = _post(client, "/labelstudio/sounds/setup", {"project": "3.1", "schema": LABEL_CONFIG})
    assert setup.json() == {"model_version": f"earmark-run-{promoted.pk}"}
    payload = {"tasks": [_ls_task(1, clips[0].pk)], "label_config": LABEL_CONFIG}
    result = _post(client, "/labelstudio/sounds/predict", payload).json()["results"][0]
    assert result["model_version"] == f"earmark-run-{promoted.pk}"
    assert result["result"][0]["value"] == {"text": ["a dog barks twice"]}


def test_the_score_is_the_suggestions_per_word_probability(
    batch: Batch, clips: list[Clip], alice: Any, promoted: TrainingRun
) -> None:
    # what a 1NN run stores: per word the confidence c of its neighbour (here 0.75 and 1)
    unsure = suggest(promoted, clips[0], "birds chirp")
    unsure.hypotheses = [{"text": "birds chirp", "log_prob": 3 * math.log(0.75),
                          "score": math.log(0.75), "entropy": 0.2158}]  # fmt: skip
    unsure.beam_size = 3
    unsure.save(update_fields=["hypotheses", "beam_size"])
    sure = suggest(promoted, clips[1], "a siren wails")
    sure.hypotheses = [{"text": "a siren wails", "log_prob": 0.0, "score": 0.0, "entropy": 0.0}]
    sure.beam_size = 3
    sure.save(update_fields=["hypotheses", "beam_size"])
    greedy = suggest(promoted, clips[2], "rain falls")
    greedy.beam_size, greedy.log_prob = 1, 3 * math.log(0.5)  # 2 words and <eos>
    greedy.save(update_fields=["beam_size", "log_prob"])
    tasks = [_ls_task(n, clip.pk) for n, clip in enumerate(clips)]
    payload = {"tasks": tasks, "label_config": LABEL_CONFIG}
    results = _post(_client(alice), "/labelstudio/sounds/predict", payload).json()["results"]
    assert [r["score"] for r in results] == [0.75, 1.0, 0.5, None]


def test_versions_lists_the_promoted_run_first_then_older_suggesting_runs(
    batch: Batch, clips: list[Clip], rey: Any, promoted: TrainingRun, snapshot: Any
) -> None:
    older = make_run(batch.project, snapshot)
    suggest(older, clips[0], "an older guess")
    make_run(batch.project, snapshot)  # never suggested: nothing to serve
    # Label Studio 1.23 asks with a GET and no body (MLApi.get_versions), basic auth
    response = _client(rey, basic=True).get(
        f"/labelstudio/sounds/{_secret(batch.project)}/versions"
    )
    assert response.status_code == 200
    assert response.json() == {
        "versions": [f"earmark-run-{promoted.pk}", f"earmark-run-{older.pk}"],
        "model_version": f"earmark-run-{promoted.pk}",
    }


def test_versions_without_a_model(project: Any, alice: Any) -> None:
    response = _client(alice).get("/labelstudio/sounds/versions")
    assert response.json() == {"versions": ["earmark-none"], "model_version": "earmark-none"}


def test_predict_serves_the_version_label_studio_pins(
    batch: Batch, clips: list[Clip], alice: Any, promoted: TrainingRun, snapshot: Any
) -> None:
    older = make_run(batch.project, snapshot)
    suggest(older, clips[0], "an older guess")
    suggest(promoted, clips[0], "a dog barks twice")
    client = _client(alice)

    def served(version: Any) -> tuple[str, str]:
        payload = {"tasks": [_ls_task(1, clips[0].pk)], "label_config": LABEL_CONFIG,
                   "model_version": version}  # fmt: skip
        result = _post(client, "/labelstudio/sounds/predict", payload).json()["results"][0]
        return result["model_version"], result["result"][0]["value"]["text"][0]

    assert served(f"earmark-run-{older.pk}") == (f"earmark-run-{older.pk}", "an older guess")
    current = (f"earmark-run-{promoted.pk}", "a dog barks twice")
    assert served(None) == current
    assert served("earmark-run-999999") == current
    assert served("someone else's model") == current
