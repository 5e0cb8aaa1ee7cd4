from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation import services
from annotation.forms import BatchForm, BatchStateForm
from annotation.models import Assignment, Batch, Caption, HitClip
from core.media import media_response
from core.models import Membership, Role
from core.views import _project_for


def _assignment_for(request: HttpRequest, pk: int) -> Assignment:
    """Only the worker holding an assignment sees it; for anyone else it does not exist."""
    assignments = Assignment.objects.select_related("hit__batch__project")
    return get_object_or_404(assignments, pk=pk, worker=request.user)


def _captions_posted(request: HttpRequest) -> dict[int, str]:
    prefix = "caption-"
    return {
        int(key.removeprefix(prefix)): value
        for key, value in request.POST.items()
        if key.startswith(prefix) and key.removeprefix(prefix).isdigit()
    }


# Workers -------------------------------------------------------------------------------


@login_required
def work(request: HttpRequest) -> HttpResponse:
    mine = Assignment.objects.filter(worker=request.user)
    by_state = dict(mine.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    context = {
        "annotates": Membership.objects.filter(user=request.user, role=Role.ANNOTATOR).exists(),
        "current": mine.filter(state=Assignment.State.ACCEPTED).first(),
        "counts": [(label, by_state[s]) for s, label in Assignment.State.choices if s in by_state],
        "recent": mine.select_related("hit__batch")[:20],
    }
    return render(request, "annotation/work.html", context)


@login_required
@require_POST
def work_claim(request: HttpRequest) -> HttpResponse:
    assignment = services.hit_claim(worker=request.user)
    if assignment is None:
        messages.info(request, "No HITs are available for you right now. Please check back later.")
        return redirect("work")
    return redirect(assignment)


@login_required
def assignment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = _assignment_for(request, pk)
    saved = {c.clip_id: c.text for c in assignment.captions.all()}
    return _render_assignment(request, assignment, texts=saved, errors={})


def _render_assignment(
    request: HttpRequest,
    assignment: Assignment,
    *,
    texts: dict[int, str],
    errors: dict[str, list[str]],
) -> HttpResponse:
    hit_clips = (
        assignment.hit.hit_clips.select_related("clip")
        .prefetch_related("clip__labels")
        .order_by("position")
    )
    items = [
        {
            "number": number,
            "clip": hit_clip.clip,
            "text": texts.get(hit_clip.clip_id, ""),
            "errors": errors.get(f"caption-{hit_clip.clip_id}", []),
        }
        for number, hit_clip in enumerate(hit_clips, start=1)
    ]
    context = {
        "assignment": assignment,
        "batch": assignment.hit.batch,
        "items": items,
        "general_errors": errors.get("__all__", []),
        "editable": assignment.state == Assignment.State.ACCEPTED,
        "max_chars": Caption.MAX_CHARS,
    }
    return render(request, "annotation/assignment.html", context)


@login_required
@require_POST
def assignment_submit(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = _assignment_for(request, pk)
    captions = _captions_posted(request)
    try:
        services.assignment_submit(assignment=assignment, worker=request.user, captions=captions)
    except ValidationError as exc:
        if not hasattr(exc, "error_dict"):  # not about the captions: late, already submitted
            messages.error(request, " ".join(exc.messages))
            return redirect("work")
        return _render_assignment(request, assignment, texts=captions, errors=exc.message_dict)
    messages.success(request, "Submitted. Thank you!")
    following = services.hit_claim(worker=request.user)
    if following is None:
        messages.info(request, "That was the last HIT available for you right now.")
        return redirect("work")
    return redirect(following)


@login_required
@require_POST
def assignment_return(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = _assignment_for(request, pk)
    try:
        services.assignment_return(assignment=assignment, worker=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.info(request, "HIT returned; someone else can take it.")
    return redirect("work")


@login_required
@require_GET
def assignment_clip_audio(request: HttpRequest, pk: int, clip_id: int) -> HttpResponse:
    """A clip's audio for the worker whose HIT holds it: workers hear their HIT's clips
    and nothing else of the project."""
    assignment = _assignment_for(request, pk)
    hit_clip = get_object_or_404(
        HitClip.objects.select_related("clip"), hit=assignment.hit_id, clip_id=clip_id
    )
    return media_response(request, hit_clip.clip.audio, missing="This clip has no audio yet.")


# Researchers ---------------------------------------------------------------------------


@login_required
def batch_list(request: HttpRequest, slug: str) -> HttpResponse:
    # reviewers may look; only researchers publish
    roles = [Role.RESEARCHER] if request.method == "POST" else [Role.RESEARCHER, Role.REVIEWER]
    project, role = _project_for(request, slug, *roles)
    form = BatchForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        try:
            batch = services.batch_publish(created_by=request.user, **form.publish_kwargs())
        except ValidationError as exc:
            form.add_error(None, exc.messages)
        else:
            messages.success(request, f"Batch published with {batch.hits.count()} HITs.")
            return redirect(batch)
    batches = project.batches.select_related("subset").annotate(n_hits=Count("hits"))
    context = {"project": project, "role": role, "form": form, "batches": batches}
    return render(request, "annotation/batch_list.html", context)


@login_required
def batch_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = _project_for(request, slug, Role.RESEARCHER, Role.REVIEWER)
    batch = get_object_or_404(Batch.objects.select_related("subset"), project=project, pk=pk)
    captions = (
        Caption.objects.filter(assignment__hit__batch=batch)
        .select_related("assignment__worker")
        .order_by("-created_at", "-id")[:50]
    )
    context = {
        "project": project,
        "role": role,
        "batch": batch,
        "progress": services.batch_progress(batch=batch),
        "captions": captions,
        "next_states": sorted(Batch.TRANSITIONS[batch.state]),
    }
    return render(request, "annotation/batch_detail.html", context)


@login_required
@require_POST
def batch_state(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = _project_for(request, slug, Role.RESEARCHER)
    batch = get_object_or_404(Batch, project=project, pk=pk)
    form = BatchStateForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError("Unknown batch state.")
        batch = services.batch_move(
            batch=batch, state=form.cleaned_data["state"], user=request.user
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Batch is now {batch.get_state_display().lower()}.")
    return redirect(batch)
