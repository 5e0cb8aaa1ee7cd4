"""The page Prolific sends its participants to (page.py explains the checks).

It opens in the participant's own tab, but carries no session of ours either: the form
and the audio links hold a signed token naming the assignment, so the submit is exempt
from Django's cookie-based CSRF check as the MTurk page's is.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from annotation import rules, services
from annotation.audio import assignment_clip_audio_response
from annotation.models import Assignment, Batch, Platform
from annotation.platforms.prolific import page as prolific
from annotation.platforms.prolific.client import ProlificUnconfirmed
from annotation.platforms.prolific.platform import ProlificPlatform
from core.throttling import client_ip

# a page's token outlives any time allotted; the assignment's own deadline still applies
TOKEN_MAX_AGE = 24 * 3600


def _page(
    request: HttpRequest,
    batch: Batch,
    *,
    assignment: Assignment | None = None,
    token: str = "",
    texts: dict[int, str] | None = None,
    errors: dict[str, list[str]] | None = None,
    problem: str = "",
    status: int = 200,
) -> HttpResponse:
    items = []
    if assignment is not None:
        for number, hit_clip in enumerate(assignment.hit.hit_clips.order_by("position"), start=1):
            audio = reverse("prolific_clip_audio", args=[batch.pk, hit_clip.clip_id])
            items.append(
                {
                    "number": number,
                    "clip_id": hit_clip.clip_id,
                    "audio_url": f"{audio}?t={token}",
                    "text": (texts or {}).get(hit_clip.clip_id, ""),
                    "errors": (errors or {}).get(f"caption-{hit_clip.clip_id}", []),
                }
            )
    context = {
        "batch": batch,
        "assignment": assignment,
        "token": token,
        "items": items,
        "general_errors": (errors or {}).get("__all__", []),
        "guidance": rules.guidance(services.caption_limits(batch)),
        "problem": problem,
    }
    return render(request, "annotation/prolific_hit.html", context, status=status)


def _status(exc: ValidationError) -> int:
    if isinstance(exc, prolific.TooManyRequests):
        return 429
    if isinstance(exc, ProlificUnconfirmed):
        return 503
    return 409


def _batch(batch_id: int) -> Batch:
    batches = Batch.objects.select_related("project").filter(platform=Platform.PROLIFIC)
    return get_object_or_404(batches, pk=batch_id)


@csrf_exempt
@require_http_methods(["GET", "POST"])
def prolific_arrive(request: HttpRequest, batch_id: int) -> HttpResponse:
    batch = _batch(batch_id)
    if request.method == "POST":
        return _submit(request, batch)
    params = request.GET
    try:
        prolific.arrival_rate_check(address=client_ip(request))
        assignment = prolific.prolific_assignment_start(
            batch=batch,
            participant_id=params.get("PROLIFIC_PID", ""),
            study=params.get("STUDY_ID", ""),
            session_id=params.get("SESSION_ID", ""),
        )
    except ValidationError as exc:
        return _page(request, batch, problem=" ".join(exc.messages), status=_status(exc))
    if assignment.state != Assignment.State.ACCEPTED:
        problem = f"This work is already {assignment.get_state_display().lower()}."
        return _page(request, batch, problem=problem, status=409)
    token = prolific.page_token(assignment=assignment)
    return _page(request, batch, assignment=assignment, token=token)


def _submit(request: HttpRequest, batch: Batch) -> HttpResponse:
    token = request.POST.get("token", "")
    try:
        assignment = prolific.page_token_read(token, max_age=TOKEN_MAX_AGE)
        if assignment.hit.batch_id != batch.pk:
            raise ValidationError("This form belongs to another study.")
    except ValidationError as exc:
        return _page(request, batch, problem=" ".join(exc.messages), status=400)
    captions: dict[int, Any] = {
        int(key.removeprefix("caption-")): value
        for key, value in request.POST.items()
        if key.startswith("caption-") and key.removeprefix("caption-").isdigit()
    }
    keep: dict[str, Any] = {"assignment": assignment, "token": token, "texts": captions}
    try:
        prolific.arrival_rate_check(address=client_ip(request))
        if assignment.state == Assignment.State.ACCEPTED:  # else assignment_submit says why
            prolific.prolific_submit_check(assignment=assignment)
    except ValidationError as exc:
        status = _status(exc)
        if status != 409:  # a refusal for now: the form stays, to send again
            return _page(request, batch, problem=" ".join(exc.messages), status=status, **keep)
        return _page(request, batch, problem=" ".join(exc.messages), status=409)
    try:
        # the shared submit: the same rules and gates as the HIT page and the API
        services.assignment_submit(
            assignment=assignment, worker=assignment.worker, captions=captions
        )
    except ValidationError as exc:
        if not hasattr(exc, "error_dict"):  # late, blocked or already submitted
            return _page(request, batch, problem=" ".join(exc.messages), status=409)
        return _page(request, batch, errors=exc.message_dict, status=400, **keep)
    return HttpResponseRedirect(
        ProlificPlatform().completion_url(assignment=assignment, params=request.GET)
    )


@require_GET
def prolific_clip_audio(request: HttpRequest, batch_id: int, clip_id: int) -> HttpResponseBase:
    """A clip of the participant's HIT, for the page carrying the token."""
    batch = _batch(batch_id)
    try:
        assignment = prolific.page_token_read(request.GET.get("t", ""), max_age=TOKEN_MAX_AGE)
    except ValidationError as exc:
        raise Http404(" ".join(exc.messages)) from None
    if assignment.hit.batch_id != batch.pk or assignment.state != Assignment.State.ACCEPTED:
        raise Http404("No such clip for this assignment.")
    return assignment_clip_audio_response(request, assignment=assignment, clip_id=clip_id)
