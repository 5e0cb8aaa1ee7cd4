"""Label Studio ML-backend endpoints, so a Label Studio project can use a project's
suggesting model: point Label Studio's "Model" setting at
`https://<earmark>/labelstudio/<project slug>/<webhook secret>` (the active page shows it)
with basic auth (a non-empty user name, an Earmark API token as the password), or send
`Authorization: Bearer <token>`. Label Studio calls <URL>/webhook without credentials: the
secret in the URL authenticates that call alone (without a secret, a researcher's token
must). Refusals carry their reason in the HTTP reason phrase, all Label Studio shows.

The shapes follow label-studio-ml-backend's server (label_studio_ml/api.py):

    GET  /health   -> {"status": "UP", "model_class": "EarmarkCaptioner"}
    POST /setup    {"project": "<id>.<ts>", "schema": "<View>…</View>", …}
                   -> {"model_version": "earmark-run-<id>"}
    POST /predict  {"tasks": [{"id", "data": {…}}], "label_config": "…", "project": …}
                   -> {"results": [{"result": [{"from_name", "to_name", "type": "textarea",
                        "value": {"text": ["a dog barks"]}}], "score": 0.71,
                        "model_version": "earmark-run-<id>"}, …]}   (one per task, in order)
    GET  /versions -> {"versions": ["earmark-run-<id>", …], "model_version": "earmark-run-<id>"}
    POST /webhook  {"action": "START_TRAINING" | "ANNOTATION_CREATED" | …, "project": {…}}
                   -> 201 {"result": {…}, "status": "ok"}; other actions 200
                   {"status": "Unknown event"}

A task names its Earmark clip by `data.clip_id` (or `data.earmark_clip_id`), or by an audio
URL of Earmark's (`…/clips/<id>/audio`). A task whose clip has no suggestion gets an empty
result with no score. The webhook stores the captions of annotations (active/services/
labelstudio.py) and only enqueues a debounced retrain; it never trains inline.
"""

from __future__ import annotations

import base64
import binascii
import math
import unicodedata
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, RequestDataTooBig, ValidationError
from django.http import Http404, HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from active import services
from active.models import Retrain
from core.access import TERSE, project_membership, signed_in_user
from core.jsonlimits import JsonRefused, bounded_loads
from core.models import Project, Role
from core.services import api_token_authenticate
from core.throttling import bad_token_record, bad_tokens_refusal
from curation.queries import project_clips
from modeling.models import Suggestion, TrainingRun

MODEL_CLASS = "EarmarkCaptioner"
# what Label Studio sends (webhooks/models.py): deletions come as ANNOTATIONS_DELETED
TRAIN_EVENTS = ("ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED", "START_TRAINING")
PREDICT_CHUNK = 500  # tasks whose clips and suggestions are read with one query each
# Who may read the model through Label Studio. Label Studio calls /health and /setup before
# every prediction round, so all three admit the same roles; the webhook writes (captions,
# retrains) and stays with researchers.
READERS = (Role.RESEARCHER, Role.REVIEWER)


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


# Typographic characters our messages use, spelled in ASCII for the reason phrase.
_ASCII = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                        "\u2013": "-", "\u2014": "-", "\u2026": "...", "\u2192": "->",
                        "\u2265": ">=", "\u2264": "<="})  # fmt: skip
REASON_MAX_CHARS = 200


def reason_phrase(message: str) -> str:
    """`message` as an HTTP reason phrase: one line of printable ASCII, at most
    REASON_MAX_CHARS. Label Studio shows a backend's error only as requests words it,
    "400 Client Error: <reason phrase> for url: …", never the JSON body."""
    text = unicodedata.normalize("NFKD", message.translate(_ASCII))
    text = " ".join(text.encode("ascii", "ignore").decode().split())
    text = "".join(c for c in text if c.isprintable())
    if len(text) > REASON_MAX_CHARS:
        text = text[: REASON_MAX_CHARS - 3].rstrip() + "..."
    return text or "Error"


def _error(status: int, message: str) -> JsonResponse:
    # No WWW-Authenticate on a 401: a browser opening the URL would pop up a password
    # dialog that phishes for the token; Label Studio sends its credentials unasked.
    response = JsonResponse({"status": "error", "error": message}, status=status)
    response.reason_phrase = reason_phrase(message)
    return response


def _token(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("bearer", "token") and value.strip():
        return value.strip()
    if scheme.lower() == "basic" and value.strip():
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


# One answer for a wrong secret and a missing project: an anonymous caller learns nothing
# about which project slugs exist.
STALE_SECRET = (
    "No Label Studio backend at this URL (a wrong or rotated secret, or no such project): "
    "copy the backend URL again from the project's active-learning page."
)


def _project(request: HttpRequest, slug: str, *roles: str, secret: str | None = None) -> Project:
    """The project, for a caller with an API token holding one of `roles`; under a backend
    URL with a secret, the secret must be the project's current one too."""
    raw = _token(request)
    holder = api_token_authenticate(raw=raw) if raw else None
    if raw and holder is None:
        # as the API's TokenAuth: only a token that failed is refused for bad ones
        if refusal := bad_tokens_refusal(request, raw):
            raise Refused(429, refusal)
        bad_token_record(request, raw)
    if holder is None:
        raise Refused(
            401, "Authenticate with an Earmark API token (Bearer, or basic auth password)."
        )
    if holder.read_only and request.method not in ("GET", "HEAD", "OPTIONS"):
        raise Refused(403, "This API token is read-only; Label Studio needs one with full access.")
    user = holder.user
    try:
        project, _ = project_membership(user, slug, *roles)
    except Http404:
        raise Refused(404, TERSE.not_found) from None
    except PermissionDenied:
        raise Refused(403, TERSE.forbidden_for(roles)) from None
    if secret is not None and not services.labelstudio_secret_matches(
        project=project, secret=secret
    ):
        raise Refused(404, STALE_SECRET)
    request.user = user
    return project


def _webhook_caller(
    request: HttpRequest, slug: str, secret: str | None
) -> tuple[Project, User | None]:
    """The project a webhook call is for, and who made it (None: Label Studio itself).
    Label Studio creates the webhook of a backend as <backend URL>/webhook and sends it no
    credentials, so under a backend URL with the project's secret the secret alone
    authenticates it; without one, a researcher's token must."""
    if secret is None:
        project = _project(request, slug, Role.RESEARCHER)
        return project, signed_in_user(request)
    found = Project.objects.filter(slug=slug).first()
    if found is None or not services.labelstudio_secret_matches(project=found, secret=secret):
        raise Refused(404, STALE_SECRET)
    return found, None


def _json(request: HttpRequest) -> dict[str, Any]:
    try:
        body = request.body
    except RequestDataTooBig:
        raise Refused(
            413,
            f"The request body is larger than UPLOAD_MAX_BYTES "
            f"({settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes): select fewer tasks in Label "
            "Studio, or raise UPLOAD_MAX_BYTES.",
        ) from None
    try:
        data = bounded_loads(
            body or b"{}", max_bytes=settings.DATA_UPLOAD_MAX_MEMORY_SIZE, what="The request body"
        )
    except JsonRefused as exc:
        raise Refused(400, f"{exc}.") from None
    if not isinstance(data, dict):
        raise Refused(400, "The request body must be a JSON object.")
    return data


def textarea_names(label_config: str) -> tuple[str, str]:
    """(from_name, to_name) of the labelling config's first TextArea control."""
    try:
        return services.textarea_names(label_config)
    except ValidationError as exc:
        raise Refused(400, " ".join(exc.messages)) from None


NO_MODEL = "earmark-none"


def version_of(run: TrainingRun | None) -> str:
    return f"earmark-run-{run.pk}" if run else NO_MODEL


def model_version(project: Project) -> str:
    return version_of(services.promoted_run(project))


def _versions(project: Project) -> list[str]:
    """The model versions Label Studio may ask for: the promoted run's first, then the
    project's other runs that have suggestions, newest first."""
    current = services.promoted_run(project)
    others = TrainingRun.objects.filter(project=project, suggestions__isnull=False)
    if current is not None:
        others = others.exclude(pk=current.pk)
    return [version_of(current), *(version_of(run) for run in others.distinct().order_by("-pk"))]


def _run_for(project: Project, requested: Any) -> TrainingRun | None:
    """The run whose suggestions answer: the one Label Studio asks for by version (a
    project whose Label Studio pins a version, auto-update off) when it is one of
    `_versions`, else the promoted run."""
    prefix = "earmark-run-"
    if isinstance(requested, str) and requested.startswith(prefix):
        pk = services.clip_id_value(requested.removeprefix(prefix))
        run = TrainingRun.objects.filter(project=project, pk=pk).first() if pk else None
        if run is not None and (
            run.promoted_at is not None or Suggestion.objects.filter(run=run).exists()
        ):
            return run
    return services.promoted_run(project)


def _confidence(suggestion: Suggestion) -> float:
    """The caption's per-token probability: exp of its beam score, which is normalised by
    length. A greedy suggestion's score is its whole log-probability (a long caption
    would look unlikely), so that is divided by its tokens (the words and <eos>). For the
    1NN model this is how clearly the nearest clip was the nearest (nn_retrieval)."""
    best = suggestion.hypotheses[0] if suggestion.hypotheses else {}
    value = best.get("score")
    if value is None or suggestion.beam_size <= 1:
        value = suggestion.log_prob / (len(suggestion.text.split()) + 1)
    return round(min(1.0, math.exp(float(value))), 6)


def _suggestions(
    project: Project, run: TrainingRun | None, ids: list[int]
) -> dict[int, Suggestion]:
    """The run's suggestion per clip among `ids`, only for clips of this project."""
    if run is None or not ids:
        return {}
    ours = project_clips(project).filter(pk__in=ids).values("pk")
    return {s.clip_id: s for s in Suggestion.objects.filter(run=run, clip_id__in=ours)}


def predictions(
    project: Project, tasks: list[Any], label_config: str, requested_version: Any = None
) -> list[dict[str, Any]]:
    """One prediction per task, in order. Label Studio's "Retrieve predictions" sends
    every selected task in one request, so they are read PREDICT_CHUNK at a time (the
    request body limit, UPLOAD_MAX_BYTES, bounds how many there can be)."""
    from_name, to_name = textarea_names(label_config)
    run = _run_for(project, requested_version)
    version = version_of(run)
    out: list[dict[str, Any]] = []
    for start in range(0, len(tasks), PREDICT_CHUNK):
        wanted = [services.task_clip_id(t) for t in tasks[start : start + PREDICT_CHUNK]]
        found = _suggestions(project, run, [c for c in wanted if c is not None])
        for clip_id in wanted:
            suggestion = found.get(clip_id) if clip_id is not None else None
            if suggestion is None:
                # no score, not 0.0: Label Studio sorts by it, and 0 would rank the
                # tasks the model has nothing to say about as its least sure
                out.append({"result": [], "score": None, "model_version": version})
                continue
            result = {"from_name": from_name, "to_name": to_name, "type": "textarea",
                      "value": {"text": [suggestion.text]}}  # fmt: skip
            out.append(
                {"result": [result], "score": _confidence(suggestion), "model_version": version}
            )
    return out


def _endpoint(view: Any) -> Any:
    def wrapped(request: HttpRequest, slug: str, secret: str | None = None) -> JsonResponse:
        try:
            return view(request, slug, secret)
        except Refused as exc:
            return _error(exc.status, str(exc))

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return csrf_exempt(wrapped)


@_endpoint
@require_GET
def health(request: HttpRequest, slug: str, secret: str | None) -> JsonResponse:
    _project(request, slug, *READERS, secret=secret)
    return JsonResponse({"status": "UP", "model_class": MODEL_CLASS})


@_endpoint
@require_POST
def setup(request: HttpRequest, slug: str, secret: str | None) -> JsonResponse:
    project = _project(request, slug, *READERS, secret=secret)
    data = _json(request)
    textarea_names(str(data.get("schema") or ""))
    return JsonResponse({"model_version": model_version(project)})


@_endpoint
@require_POST
def predict(request: HttpRequest, slug: str, secret: str | None) -> JsonResponse:
    project = _project(request, slug, *READERS, secret=secret)
    data = _json(request)
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        raise Refused(400, '"tasks" must be a list of Label Studio tasks.')
    label_config = str(data.get("label_config") or "")
    results = predictions(project, tasks, label_config, data.get("model_version"))
    return JsonResponse({"results": results})


@_endpoint
@require_GET
def versions(request: HttpRequest, slug: str, secret: str | None) -> JsonResponse:
    """GET /versions as label-studio-ml-backend serves it; Label Studio lists these for a
    project to pick from (it sends no body, and reads only "versions")."""
    project = _project(request, slug, *READERS, secret=secret)
    return JsonResponse({"versions": _versions(project), "model_version": model_version(project)})


@_endpoint
@require_POST
def webhook(request: HttpRequest, slug: str, secret: str | None) -> JsonResponse:
    project, caller = _webhook_caller(request, slug, secret)
    data = _json(request)
    event = data.get("action")
    if event not in TRAIN_EVENTS:
        return JsonResponse({"status": "Unknown event"}, status=200)
    captions: dict[str, Any] | None = None
    try:
        if event in ("ANNOTATION_CREATED", "ANNOTATION_UPDATED"):
            written = services.labelstudio_annotation_save(project=project, payload=data)
            if written.skipped:  # recorded for the project's Label Studio section too
                raise ValidationError(f"not stored: {written.skipped}")
            captions = written.as_dict()
        elif event == "ANNOTATIONS_DELETED":
            deleted = services.labelstudio_annotations_delete(project=project, payload=data)
            captions = {"deleted": deleted}
    except ValidationError as exc:
        raise Refused(400, f"{event}: {' '.join(exc.messages)}") from None
    if event == "START_TRAINING":
        retrain = services.retrain_start(
            project=project,
            trigger=Retrain.Trigger.LABEL_STUDIO,
            reason="Label Studio START_TRAINING",
            user=caller,
        )
        result: dict[str, Any] = {"retrain": retrain.pk, "job": retrain.job_id}
    else:
        # annotations in Label Studio: retrain only when the corpus grew enough
        config = services.project_config(project=project)
        approved = services.approved_caption_count(project)
        due, why = services.retrain_due(config=config, approved=approved, now=timezone.now())
        result = {"retrain": None, "reason": why, "captions": captions}
        if due:
            retrain = services.retrain_start(
                project=project,
                trigger=Retrain.Trigger.LABEL_STUDIO,
                reason=f"Label Studio {event}: {why}",
                user=caller,
            )
            result.update(retrain=retrain.pk, job=retrain.job_id)
    return JsonResponse({"result": result, "status": "ok"}, status=201)
