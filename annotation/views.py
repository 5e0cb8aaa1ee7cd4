from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Exists, OuterRef, Prefetch
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import rules, services
from annotation.audio import assignment_clip_audio_response
from annotation.forms import BatchForm, BatchStateForm, ClipReportForm, PresetForm
from annotation.models import Assignment, Batch, Caption, ClipReport, HitClip, VideoHintView
from annotation.platforms import PLATFORMS
from annotation.platforms.publishing import batch_platform_publish as batch_platform_publish_service
from annotation.platforms.publishing import platforms_offered
from annotation.prefill import starting_texts
from annotation.presets import BATCH_PRESETS
from core.access import project_for_page, signed_in_user
from core.flash import job_queued
from core.media import media_response
from core.models import Membership, Role
from crowd.queries import blocked_everywhere, requirements_refusals
from curation.models import Clip, Label


def _assignment_for(request: HttpRequest, pk: int) -> Assignment:
    """Only the worker holding an assignment sees it; for anyone else it does not exist."""
    assignments = Assignment.objects.select_related("hit__batch__project")
    return get_object_or_404(assignments, pk=pk, worker=signed_in_user(request))


def _captions_posted(request: HttpRequest) -> dict[int, str]:
    prefix = "caption-"
    return {
        int(key.removeprefix(prefix)): request.POST.get(key, "")
        for key in request.POST
        if key.startswith(prefix) and key.removeprefix(prefix).isdigit()
    }


# Workers -------------------------------------------------------------------------------


@login_required
def work(request: HttpRequest) -> HttpResponse:
    worker = signed_in_user(request)
    mine = Assignment.objects.filter(worker=worker)
    by_state = dict(mine.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    context = {
        "annotates": Membership.objects.filter(user=worker, role=Role.ANNOTATOR).exists(),
        "current": mine.filter(state=Assignment.State.ACCEPTED).first(),
        "counts": [(label, by_state[s]) for s, label in Assignment.State.choices if s in by_state],
        "recent": mine.select_related("hit__batch")[:20],
    }
    return render(request, "annotation/work.html", context)


@login_required
@require_POST
def work_claim(request: HttpRequest) -> HttpResponse:
    assignment = services.hit_claim(worker=signed_in_user(request))
    if assignment is None and blocked_everywhere(worker=signed_in_user(request)):
        return redirect("work_blocked")
    if assignment is None:
        messages.info(request, "No HITs are available for you right now. Please check back later.")
        for refusal in requirements_refusals(worker=signed_in_user(request)):
            messages.warning(request, f"Not open to you: {refusal}")
        return redirect("work")
    return redirect(assignment)


@login_required
def assignment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = _assignment_for(request, pk)
    saved = {c.clip_id: c.text for c in assignment.captions.all()}
    # apps built on annotation may prefill the boxes (active: an edit-mode batch's suggestions)
    texts = {**starting_texts(assignment=assignment), **saved}
    return _render_assignment(request, assignment, texts=texts, errors={})


def _render_assignment(
    request: HttpRequest,
    assignment: Assignment,
    *,
    texts: dict[int, str],
    errors: dict[str, list[str]],
) -> HttpResponse:
    batch = assignment.hit.batch
    limits = services.caption_limits(batch)
    worker = signed_in_user(request)
    summary = services.worker_summary(worker=worker)
    items = _clip_items(assignment, texts=texts, errors=errors)
    context = {
        "assignment": assignment,
        "batch": batch,
        "items": items,
        "general_errors": errors.get("__all__", []),
        "editable": assignment.state == Assignment.State.ACCEPTED,
        "max_chars": Caption.MAX_CHARS,
        "guidance": rules.guidance(limits),
        "caption_rules": rules.table(limits),
        "hit_data": {"clips": [item["data"] for item in items]},
        "summary": summary,
        "batch_done": Assignment.objects.filter(
            worker=worker, hit__batch=batch, state__in=services.REVIEW_STATES
        ).count(),
        "examples": rules.examples(limits),
        # new workers find the instructions open; others open them with one click or "?"
        "first_hit": summary.submitted + summary.approved + summary.rejected == 0,
        "report_form": ClipReportForm(),
    }
    return render(request, "annotation/assignment.html", context)


def _clip_items(
    assignment: Assignment, *, texts: dict[int, str], errors: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """One entry per clip of the HIT: what the page shows and what hit.js needs."""
    labels = Label.objects.select_related("word_label").order_by("name")
    hit_clips = (
        assignment.hit.hit_clips.select_related("clip")
        .prefetch_related(Prefetch("clip__labels", queryset=labels))
        .order_by("position")
    )
    heard = set(assignment.listens.values_list("clip_id", flat=True))
    opened = set(assignment.video_hints.values_list("clip_id", flat=True))
    items = []
    for number, hit_clip in enumerate(hit_clips, start=1):
        clip, args = hit_clip.clip, [assignment.pk, hit_clip.clip_id]
        data = {
            "id": clip.pk,
            "number": number,
            "peaks": clip.peaks,
            "duration": services.clip_seconds(clip),
            "heard": clip.pk in heard,
            "heard_url": reverse("assignment_clip_heard", args=args),
            "video_open_url": reverse("assignment_video_hint", args=args) if clip.video else None,
            "video_url": reverse("assignment_clip_video", args=args),
            "video_opened": clip.pk in opened,
        }
        items.append(
            {
                "number": number,
                "clip": clip,
                "text": texts.get(clip.pk, ""),
                "errors": errors.get(f"caption-{clip.pk}", []),
                "hints": _hints(clip),
                "data": data,
            }
        )
    return items


def _hints(clip: Clip) -> list[dict[str, Any]]:
    """The clip's word labels ("dog"), each with the ontology labels it stands for, whose
    descriptions the page shows on hover and focus; a label without a word label stands
    for itself."""
    by_word: dict[str, list[Label]] = {}
    for label in clip.labels.all():
        by_word.setdefault(label.word, []).append(label)
    return [{"word": word, "labels": labels} for word, labels in sorted(by_word.items())]


@login_required
@require_POST
def assignment_submit(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = _assignment_for(request, pk)
    captions = _captions_posted(request)
    try:
        services.assignment_submit(
            assignment=assignment, worker=signed_in_user(request), captions=captions
        )
    except ValidationError as exc:
        if not hasattr(exc, "error_dict"):  # not about the captions: late, already submitted
            messages.error(request, " ".join(exc.messages))
            return redirect("work")
        return _render_assignment(request, assignment, texts=captions, errors=exc.message_dict)
    messages.success(request, "Submitted. Thank you!")
    return _next_hit(request)


def _next_hit(request: HttpRequest) -> HttpResponse:
    """Straight on to the worker's next HIT, or to the "no more work" page."""
    following = services.hit_claim(worker=signed_in_user(request))
    if following is None:
        return redirect("work_done")
    return redirect(following)


@login_required
def work_done(request: HttpRequest) -> HttpResponse:
    summary = services.worker_summary(worker=signed_in_user(request))
    return render(request, "annotation/work_done.html", {"summary": summary})


@login_required
@require_POST
def assignment_return(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = _assignment_for(request, pk)
    try:
        services.assignment_return(assignment=assignment, worker=signed_in_user(request))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.info(request, "HIT returned; someone else can take it.")
    return redirect("work")


@login_required
@require_GET
def assignment_clip_audio(request: HttpRequest, pk: int, clip_id: int) -> HttpResponseBase:
    """A clip's audio for the worker whose HIT holds it: workers hear their HIT's clips
    and nothing else of the project."""
    assignment = _assignment_for(request, pk)
    # only an open assignment's plays count toward "heard to the end"
    return assignment_clip_audio_response(
        request,
        assignment=assignment,
        clip_id=clip_id,
        record=assignment.state == Assignment.State.ACCEPTED,
    )


def _hit_clip_for(assignment: Assignment, clip_id: int) -> HitClip:
    return get_object_or_404(
        HitClip.objects.select_related("clip"), hit=assignment.hit_id, clip_id=clip_id
    )


def _refused(exc: ValidationError) -> JsonResponse:
    return JsonResponse({"error": " ".join(exc.messages)}, status=409)


@login_required
@require_POST
def assignment_clip_heard(request: HttpRequest, pk: int, clip_id: int) -> HttpResponse:
    """The page reports that the worker heard the clip to the end (unlocks the box)."""
    assignment = _assignment_for(request, pk)
    _hit_clip_for(assignment, clip_id)
    try:
        listen = services.clip_heard(
            assignment=assignment, worker=signed_in_user(request), clip_id=clip_id
        )
    except ValidationError as exc:
        return _refused(exc)
    return JsonResponse({"heard_at": listen.heard_at.isoformat()})


@login_required
@require_POST
def assignment_video_hint(request: HttpRequest, pk: int, clip_id: int) -> HttpResponse:
    """Logs the opening of the video hint; the page then loads the video."""
    assignment = _assignment_for(request, pk)
    _hit_clip_for(assignment, clip_id)
    try:
        view = services.video_hint_open(
            assignment=assignment, worker=signed_in_user(request), clip_id=clip_id
        )
    except ValidationError as exc:
        return _refused(exc)
    url = reverse("assignment_clip_video", args=[pk, clip_id])
    return JsonResponse({"opened_at": view.opened_at.isoformat(), "video_url": url})


@login_required
@require_GET
def assignment_clip_video(request: HttpRequest, pk: int, clip_id: int) -> HttpResponseBase:
    """The video hint, once its opening is logged: no quiet peeks past the log."""
    assignment = _assignment_for(request, pk)
    hit_clip = _hit_clip_for(assignment, clip_id)
    if not VideoHintView.objects.filter(assignment=assignment, clip_id=clip_id).exists():
        raise PermissionDenied("Open the video hint on the HIT page first.")
    return media_response(request, hit_clip.clip.video, missing="This clip has no video hint.")


@login_required
@require_POST
def assignment_report(request: HttpRequest, pk: int) -> HttpResponse:
    """A problem with a clip: recorded for the researchers, the HIT goes back to the pool,
    and the worker moves on to their next HIT."""
    assignment = _assignment_for(request, pk)
    form = ClipReportForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Report not sent: {_form_errors(form)}")
        return redirect(assignment)
    _hit_clip_for(assignment, form.cleaned_data["clip_id"])
    try:
        report = services.clip_report(
            assignment=assignment, worker=signed_in_user(request), **form.cleaned_data
        )
    except ValidationError as exc:
        messages.error(request, f"Report not sent: {' '.join(exc.messages)}")
        return redirect(assignment if assignment.state == Assignment.State.ACCEPTED else "work")
    problem = ClipReport.Problem(report.problem).label
    messages.info(request, f"Thanks, reported: {problem}. You will not get this clip again.")
    return _next_hit(request)


def _form_errors(form: ClipReportForm) -> str:
    return " ".join(
        f"{field}: {' '.join(str(error) for error in errors)}"
        for field, errors in form.errors.items()
    )


# Researchers ---------------------------------------------------------------------------


@login_required
def batch_list(request: HttpRequest, slug: str) -> HttpResponse:
    # reviewers may look; only researchers publish
    roles = [Role.RESEARCHER] if request.method == "POST" else [Role.RESEARCHER, Role.REVIEWER]
    project, role = project_for_page(request, slug, *roles)
    presets = PresetForm(request.GET or None)
    preset = BATCH_PRESETS[presets.cleaned_data["preset"]] if presets.is_valid() else None
    form = BatchForm(request.POST or None, project=project, preset=preset)
    if request.method == "POST" and form.is_valid():
        try:
            batch = services.batch_publish(
                created_by=signed_in_user(request), **form.publish_kwargs()
            )
        except ValidationError as exc:
            by_field = exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}
            for field, errors in by_field.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Batch published with {batch.hits.count()} HITs.")
            return redirect(batch)
    batches = project.batches.select_related("subset").annotate(n_hits=Count("hits"))
    context = {
        "project": project,
        "role": role,
        "form": form,
        "presets": presets if preset is not None else PresetForm(),
        "preset": preset,
        "batches": batches,
    }
    return render(request, "annotation/batch_list.html", context)


@login_required
def batch_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_for_page(request, slug, Role.RESEARCHER, Role.REVIEWER)
    batch = get_object_or_404(Batch.objects.select_related("subset"), project=project, pk=pk)
    hinted = VideoHintView.objects.filter(assignment=OuterRef("assignment"), clip=OuterRef("clip"))
    captions = (
        Caption.objects.filter(assignment__hit__batch=batch)
        .select_related("assignment__worker")
        .annotate(video_hint=Exists(hinted))
        .order_by("-created_at", "-id")[:50]
    )
    reports = ClipReport.objects.filter(assignment__hit__batch=batch).select_related("worker")
    context = {
        "project": project,
        "role": role,
        "batch": batch,
        "progress": services.batch_progress(batch=batch),
        "captions": captions,
        "reports": reports[:50],
        "report_count": reports.count(),
        "next_states": sorted(Batch.TRANSITIONS[batch.state]),
        "platform_offers": platforms_offered(batch=batch) if role == Role.RESEARCHER else [],
    }
    return render(request, "annotation/batch_detail.html", context)


@login_required
@require_POST
def batch_platform_publish(request: HttpRequest, slug: str, pk: int, platform: str) -> HttpResponse:
    project, _ = project_for_page(request, slug, Role.RESEARCHER)
    batch = get_object_or_404(Batch, project=project, pk=pk)
    if platform not in PLATFORMS:
        raise Http404("No such crowd platform.")
    try:
        job = batch_platform_publish_service(
            batch=batch, platform=platform, by=signed_in_user(request)
        )
    except ValidationError as exc:
        messages.error(request, f"Not published: {' '.join(exc.messages)}")
        return redirect(batch)
    job_queued(request, job=job, text=f"Publishing {batch.name} as {{job}}.")
    return redirect(job)


@login_required
@require_POST
def batch_state(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, Role.RESEARCHER)
    batch = get_object_or_404(Batch, project=project, pk=pk)
    form = BatchStateForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError("Unknown batch state.")
        batch = services.batch_move(
            batch=batch, state=form.cleaned_data["state"], user=signed_in_user(request)
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Batch is now {batch.get_state_display().lower()}.")
    return redirect(batch)
