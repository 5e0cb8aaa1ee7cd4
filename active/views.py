"""Active-learning pages: the project's loop (model, retrains, promotion decisions), a
batch's strategy and pre-suggestion mode, and the learning curves. Researchers act;
reviewers may look."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from active import services
from active.charts import curve_svg
from active.forms import BatchActiveForm, ProjectActiveForm
from active.models import PromotionDecision, Retrain
from annotation.models import Batch
from core.access import project_for_page, signed_in_user
from core.models import Role
from core.services import job_enqueue
from modeling.models import Suggestion, TrainingRun

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)
SUGGESTIONS_SHOWN = 12  # on the loop page; the run's page lists more


@login_required
def loop(request: HttpRequest, slug: str) -> HttpResponse:
    roles = WRITE if request.method == "POST" else READ
    project, role = project_for_page(request, slug, *roles)
    config = services.project_config(project=project)
    form = ProjectActiveForm(
        request.POST or None,
        initial={
            "model_name": config.model_name,
            "preset": config.preset,
            "overrides": "\n".join(config.overrides),
            "auto_retrain": config.auto_retrain,
        },
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.project_configure(
                project=project, user=signed_in_user(request), **form.cleaned_data
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, "Saved the loop's settings.")
            return redirect("active_loop", project.slug)
    promoted = services.promoted_run(project)
    # what the suggesting model proposes, least certain first: what edit-mode annotators
    # start from and what the flag checks compare captions with
    suggestions = (
        promoted.suggestions.select_related("clip").order_by("-mean_entropy", "clip_id")
        if promoted
        else Suggestion.objects.none()
    )
    context = {
        "project": project,
        "role": role,
        "config": config,
        "form": form if role == Role.RESEARCHER else None,
        "approved": services.approved_caption_count(project),
        "promoted": promoted,
        "suggestions": suggestions[:SUGGESTIONS_SHOWN],
        "suggestion_count": suggestions.count(),
        "retrains": Retrain.objects.filter(project=project).select_related("job", "run")[:20],
        "decisions": PromotionDecision.objects.filter(project=project).select_related(
            "run", "incumbent"
        )[:50],
        "runs": TrainingRun.objects.filter(project=project, state=TrainingRun.State.SUCCEEDED)[:20],
    }
    return render(request, "active/loop.html", context)


@login_required
@require_POST
def retrain(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    started = services.retrain_start(
        project=project,
        trigger=Retrain.Trigger.MANUAL,
        reason=f"started by {request.user.get_username()}",
        user=signed_in_user(request),
        debounce=False,
    )
    messages.success(request, f"Retrain #{started.pk} is queued on the GPU queue.")
    return redirect("active_loop", project.slug)


@login_required
@require_POST
def promote_if_better(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    run = get_object_or_404(TrainingRun, project=project, pk=run_id)
    try:
        decision = services.run_promote_if_better(run=run)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        (messages.success if decision.promoted else messages.info)(request, decision.reason)
    return redirect("active_loop", project.slug)


@login_required
@require_POST
def batch_configure(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    batch = get_object_or_404(Batch, project=project, pk=pk)
    form = BatchActiveForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError(
                "; ".join(
                    f"{field}: {' '.join(str(error) for error in errors)}"
                    for field, errors in form.errors.items()
                )
            )
        config = services.batch_configure(
            batch=batch, user=signed_in_user(request), **form.cleaned_data
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request,
            f"HITs ranked by {config.get_strategy_display().lower()}; "
            f"pre-suggestion {config.presuggest}.",
        )
    return redirect(batch)


@login_required
@require_POST
def batch_flag(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *READ)
    batch = get_object_or_404(Batch, project=project, pk=pk)
    job = job_enqueue(
        kind="batch_flag",
        params={"batch_id": batch.pk},
        project=project,
        created_by=signed_in_user(request),
        label=f"Check captions of batch {batch.name}",
    )
    messages.success(request, f"Checking the batch's captions (job #{job.pk}).")
    return redirect(batch)


@login_required
@require_GET
def curve(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, *READ)
    series = services.curve_series(project=project)
    return render(
        request,
        "active/curve.html",
        {"project": project, "role": role, "series": series, "svg": curve_svg(series)},
    )
