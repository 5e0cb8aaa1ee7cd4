"""The ExternalQuestion page MTurk shows its workers (the package's __init__ explains the
mode).

MTurk frames the page on its own site, so these views allow framing by MTurk alone, and
they carry no session: the browser sends no cookies of ours to a third-party frame. The
form is protected by a signed token naming the assignment instead, which is why the
submit is exempt from Django's cookie-based CSRF check.

The query string is the visitor's word only: opening an assignment and submitting it are
confirmed with MTurk first, and counted per client address and per HIT
(page.py, "Who is asking").
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from annotation import rules, services
from annotation.audio import assignment_clip_audio_response
from annotation.models import Assignment, Hit, Platform
from annotation.platforms import refs
from annotation.platforms.mturk import page as mturk
from annotation.platforms.mturk.client import (
    MTURK,
    Kind,
    MTurkUnconfirmed,
    TooManyRequests,
    assignment_mturk_id,
    hit_mturk_id,
)
from annotation.platforms.mturk.publish import qualification_audio_signed
from core.throttling import client_ip
from crowd.models import QualificationClip
from curation.serving import clip_audio_response

# a page's token outlives any time allotted; the assignment's own deadline still applies
TOKEN_MAX_AGE = 24 * 3600
FRAME_ANCESTORS = "frame-ancestors https://*.mturk.com https://mturk.com"


def _framed(response: HttpResponse) -> HttpResponse:
    response["Content-Security-Policy"] = FRAME_ANCESTORS
    return response


def _page(
    request: HttpRequest,
    hit: Hit,
    *,
    assignment: Assignment | None = None,
    token: str = "",
    texts: dict[int, str] | None = None,
    errors: dict[str, list[str]] | None = None,
    problem: str = "",
    status: int = 200,
) -> HttpResponse:
    limits = services.caption_limits(hit.batch)
    items = [
        {
            "number": number,
            "clip_id": hit_clip.clip_id,
            "audio_url": reverse("mturk_clip_audio", args=[hit.pk, hit_clip.clip_id])
            + f"?t={token}"
            if token
            else "",
            "text": (texts or {}).get(hit_clip.clip_id, ""),
            "errors": (errors or {}).get(f"caption-{hit_clip.clip_id}", []),
        }
        for number, hit_clip in enumerate(hit.hit_clips.order_by("position"), start=1)
    ]
    context = {
        "hit": hit,
        "batch": hit.batch,
        "assignment": assignment,
        "token": token,
        "items": items,
        "general_errors": (errors or {}).get("__all__", []),
        "guidance": rules.guidance(limits),
        "problem": problem,
    }
    return _framed(render(request, "annotation/mturk_hit.html", context, status=status))


def _refusal_status(exc: ValidationError, default: int) -> int:
    if isinstance(exc, TooManyRequests):
        return 429
    if isinstance(exc, MTurkUnconfirmed):
        return 503
    return default


def _mturk_hit(hit_id: int) -> Hit:
    on_mturk = refs.on_platform(platform=MTURK, kind=Kind.HIT)
    hits = Hit.objects.select_related("batch__project").filter(
        pk__in=on_mturk, batch__platform=Platform.MTURK
    )
    return get_object_or_404(hits, pk=hit_id)


@xframe_options_exempt
@csrf_exempt
@require_http_methods(["GET", "POST"])
def mturk_hit(request: HttpRequest, hit_id: int) -> HttpResponse:
    hit = _mturk_hit(hit_id)
    if request.method == "POST":
        return _submit(request, hit)
    params = request.GET
    if params.get("hitId") != hit_mturk_id(hit):
        raise Http404("No such MTurk HIT.")
    assignment_id = params.get("assignmentId", mturk.PREVIEW)
    if assignment_id == mturk.PREVIEW:
        return _page(request, hit)  # the preview: instructions and clips, no boxes
    try:
        mturk.page_rate_check(address=client_ip(request), hit=hit)
        submit_to = mturk.submit_to_checked(params.get("turkSubmitTo", ""))
        assignment = mturk.mturk_assignment_start(
            hit=hit, assignment_id=assignment_id, worker_id=params.get("workerId", "")
        )
        mturk.page_confirmed(hit=hit)
    except ValidationError as exc:
        status = _refusal_status(exc, 409)
        return _page(request, hit, problem=" ".join(exc.messages), status=status)
    if assignment.state != Assignment.State.ACCEPTED:
        problem = f"This assignment is already {assignment.get_state_display().lower()}."
        return _page(request, hit, problem=problem, status=409)
    token = mturk.page_token(assignment=assignment, submit_to=submit_to)
    return _page(request, hit, assignment=assignment, token=token)


def _submit(request: HttpRequest, hit: Hit) -> HttpResponse:
    token = request.POST.get("token", "")
    try:
        assignment, submit_to = mturk.page_token_read(token, max_age=TOKEN_MAX_AGE)
        if assignment.hit_id != hit.pk:
            raise ValidationError("This form belongs to another HIT.")
    except ValidationError as exc:
        return _page(request, hit, problem=" ".join(exc.messages), status=400)
    captions: dict[int, Any] = {
        int(key.removeprefix("caption-")): value
        for key, value in request.POST.items()
        if key.startswith("caption-") and key.removeprefix("caption-").isdigit()
    }
    try:
        mturk.page_rate_check(address=client_ip(request), hit=hit)
        if assignment.state == Assignment.State.ACCEPTED:  # else assignment_submit says why
            mturk.mturk_submit_check(assignment=assignment)
            mturk.page_confirmed(hit=hit)
    except ValidationError as exc:
        status = _refusal_status(exc, 409)
        if status == 409:
            return _page(request, hit, problem=" ".join(exc.messages), status=status)
        # a refusal for now: the form stays, with the captions typed, to send again
        return _page(
            request,
            hit,
            assignment=assignment,
            token=token,
            texts=captions,
            problem=" ".join(exc.messages),
            status=status,
        )
    try:
        services.assignment_submit(
            assignment=assignment, worker=assignment.worker, captions=captions
        )
    except ValidationError as exc:
        if not hasattr(exc, "error_dict"):  # late, blocked or already submitted
            problem = " ".join(exc.messages)
            if getattr(exc, "code", None) == "blocked":
                problem += " Please return the HIT on MTurk."
            return _page(request, hit, problem=problem, status=409)
        return _page(
            request,
            hit,
            assignment=assignment,
            token=token,
            texts=captions,
            errors=exc.message_dict,
            status=400,
        )
    context = {
        "action": f"{submit_to}/mturk/externalSubmit",
        "assignment_id": assignment_mturk_id(assignment),
        "captions": len(captions),
    }
    return _framed(render(request, "annotation/mturk_submit.html", context))


@xframe_options_exempt
@require_GET
def mturk_clip_audio(request: HttpRequest, hit_id: int, clip_id: int) -> HttpResponseBase:
    """A clip of the HIT for the worker whose page carries the token."""
    hit = _mturk_hit(hit_id)
    try:
        assignment, _ = mturk.page_token_read(request.GET.get("t", ""), max_age=TOKEN_MAX_AGE)
    except ValidationError as exc:
        raise Http404(" ".join(exc.messages)) from None
    if assignment.hit_id != hit.pk or assignment.state != Assignment.State.ACCEPTED:
        raise Http404("No such clip for this assignment.")
    return assignment_clip_audio_response(request, assignment=assignment, clip_id=clip_id)


@require_GET
def mturk_qualification_audio(
    request: HttpRequest, qualification_id: int, clip_id: int
) -> HttpResponseBase:
    """A clip of a qualification test made an MTurk qualification type: the test MTurk
    shows links here with a signature per clip (publish.qualification_audio_url)."""
    if not qualification_audio_signed(
        qualification_id=qualification_id, clip_id=clip_id, signature=request.GET.get("s", "")
    ):
        raise Http404("No such clip.")
    item = get_object_or_404(
        QualificationClip.objects.select_related("clip"),
        qualification_id=qualification_id,
        qualification_id__in=refs.on_platform(platform=MTURK, kind=Kind.QUALIFICATION),
        clip_id=clip_id,
    )
    return clip_audio_response(request, item.clip)
