"""Training-run pages: the leaderboard and a form to start a run, a run's live progress,
learning curve, scores and suggestions. Researchers act; reviewers may look."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.access import project_for_page, signed_in_user
from core.flash import job_queued
from core.models import Job, Project, Role
from core.services import job_cancel, job_enqueue
from modeling import services
from modeling.charts import learning_curve_svg
from modeling.forms import RunForm, StartFromForm, SuggestForm, recipe_rows
from modeling.models import TrainingRun

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)
METRICS = ("BLEU-1", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr-D", "SPICE", "SPIDEr")
SPLITS = ("val", "test")


def _run_for(request: HttpRequest, slug: str, pk: int, *roles: str) -> tuple[TrainingRun, Role]:
    project, role = project_for_page(request, slug, *roles)
    run = get_object_or_404(
        TrainingRun.objects.select_related("project", "snapshot", "job"), project=project, pk=pk
    )
    return run, role


def leaderboard(project: Project, split: str) -> list[dict[str, Any]]:
    """Finished runs with scores on `split`, best CIDEr-D first (runs without one last)."""
    runs = TrainingRun.objects.filter(project=project, state=TrainingRun.State.SUCCEEDED)
    rows: list[dict[str, Any]] = []
    for run in runs.select_related("snapshot"):
        scores = run.metrics.get(split)
        if not scores:
            continue
        rows.append({"run": run, "scores": [scores.get(m) for m in METRICS]})
    cider = METRICS.index("CIDEr-D")
    rows.sort(key=lambda r: (r["scores"][cider] is None, -(r["scores"][cider] or 0)))
    return rows


@login_required
def run_list(request: HttpRequest, slug: str) -> HttpResponse:
    roles = WRITE if request.method == "POST" else READ
    project, role = project_for_page(request, slug, *roles)
    form = RunForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = services.run_start(
                project=project,
                model_name=data["model_name"],
                snapshot=data["snapshot"],
                created_by=signed_in_user(request),
                preset=data["preset"],
                overrides=data["overrides"],
                epochs=data["epochs"],
                recipe=data["recipe"],
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            if run.job is not None:
                job_queued(request, job=run.job, text=f"Run #{run.pk} is queued as {{job}}.")
            return redirect(run)
    split = request.GET.get("split", "")
    if split not in SPLITS:
        split = "val"  # the split the suggesting run is chosen on (active.services)
    context = {
        "project": project,
        "role": role,
        "form": form if role == Role.RESEARCHER else None,
        "recipes": recipe_rows(),
        "runs": TrainingRun.objects.filter(project=project).select_related("snapshot", "job")[:100],
        "leaderboard": leaderboard(project, split),
        "split": split,
        "splits": SPLITS,
        "metrics": METRICS,
    }
    return render(request, "modeling/run_list.html", context, status=400 if form.errors else 200)


@login_required
@require_GET
def run_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    run, role = _run_for(request, slug, pk, *READ)
    suggestions = run.suggestions.select_related("clip").order_by("-mean_entropy")[:50]
    context = {
        "project": run.project,
        "role": role,
        "run": run,
        "job": run.job,
        "metrics": METRICS,
        "scores": [
            (split, [run.metrics[split].get(m) for m in METRICS])
            for split in SPLITS
            if split in run.metrics
        ],
        "suggestions": suggestions,
        "suggestion_count": run.suggestions.count(),
        "suggest_form": (
            SuggestForm(project=run.project, initial={"beam_size": run.final_beam_size})
            if role == Role.RESEARCHER
            else None
        ),
        "beam_size": run.final_beam_size,
        "suggest_jobs": Job.objects.filter(kind="clips_caption", params__run_id=run.pk)[:5],
        "can_cancel": role == Role.RESEARCHER
        and run.job is not None
        and run.job.state in (Job.State.QUEUED, Job.State.RUNNING),
    }
    return render(request, "modeling/run_detail.html", context)


@login_required
@require_GET
def run_curve(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """The learning curve as SVG: training loss per step, validation CIDEr-D per check."""
    run, _ = _run_for(request, slug, pk, *READ)
    response = HttpResponse(learning_curve_svg(run.learning_curve), content_type="image/svg+xml")
    response["Cache-Control"] = "private, no-cache"
    return response


@login_required
@require_POST
def run_cancel(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    run, _ = _run_for(request, slug, pk, *WRITE)
    if run.job is None:
        messages.error(request, "This run has no job to cancel.")
    else:
        try:
            job_cancel(job=run.job)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.info(request, "Cancelling: the run stops after its current step.")
    return redirect(run)


@login_required
@require_POST
def run_resume(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    run, _ = _run_for(request, slug, pk, *WRITE)
    try:
        services.run_resume(run=run, user=signed_in_user(request))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, "Resuming from the last checkpoint.")
    return redirect(run)


@login_required
@require_POST
def run_start_from(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    run, _ = _run_for(request, slug, pk, *WRITE)
    form = StartFromForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Epochs: a whole number of at least 1, or empty.")
        return redirect(run)
    try:
        new = services.run_start_from(
            run=run, created_by=signed_in_user(request), epochs=form.cleaned_data["epochs"]
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(run)
    messages.success(request, f"Run #{new.pk} starts from run #{run.pk}'s checkpoint.")
    return redirect(new)


@login_required
@require_POST
def run_promote(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    run, _ = _run_for(request, slug, pk, *WRITE)
    try:
        promotion = services.run_promote(run=run, user=signed_in_user(request))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, promotion.message)
    return redirect(run)


@login_required
@require_POST
def run_suggest(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    run, _ = _run_for(request, slug, pk, *WRITE)
    form = SuggestForm(request.POST, project=run.project)
    if not form.is_valid():
        messages.error(request, "Pick a subset and a beam size from 1 to 10.")
    elif run.state != TrainingRun.State.SUCCEEDED:
        messages.error(request, f"Run #{run.pk} is {run.state}; only a finished run suggests.")
    else:
        job = job_enqueue(
            kind="clips_caption",
            params={
                "run_id": run.pk,
                "subset_id": form.cleaned_data["subset"].pk,
                "beam_size": form.cleaned_data["beam_size"],
            },
            project=run.project,
            created_by=signed_in_user(request),
            label=f"Suggest captions for {form.cleaned_data['subset'].name} (run #{run.pk})",
        )
        job_queued(request, job=job, text="Captioning as {job}.")
    return redirect(run)
