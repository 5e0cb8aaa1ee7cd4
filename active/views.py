"""Active-learning pages: the project's loop (model, retrains, promotion decisions), a
batch's strategy and pre-suggestion mode, and the learning curves. Researchers act;
reviewers may look."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from active import services
from active.charts import curve_svg, flags_svg
from active.forms import BatchActiveForm, ProjectActiveForm
from active.models import (
    FlagCalibration,
    LabelStudioRefusal,
    ProjectConfig,
    PromotionDecision,
    Retrain,
)
from annotation.models import Batch
from core.access import project_for_page, signed_in_user
from core.flash import job_queued
from core.models import Project, Role
from core.services import job_enqueue
from core.uploads import accepts_uploads
from modeling.models import Suggestion, TrainingRun

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)
SUGGESTIONS_SHOWN = 12  # on the loop page; the run's page lists more
LABELSTUDIO_REFUSALS_SHOWN = 20  # the latest captions the webhook refused


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
        "promoted_val_cider": promoted.score("val", "CIDEr-D") if promoted else None,
        "suggestions": suggestions[:SUGGESTIONS_SHOWN],
        "suggestion_count": suggestions.count(),
        "retrains": Retrain.objects.filter(project=project).select_related("job", "run")[:20],
        "decisions": PromotionDecision.objects.filter(project=project).select_related(
            "run", "incumbent"
        )[:50],
        "runs": TrainingRun.objects.filter(project=project, state=TrainingRun.State.SUCCEEDED)[:20],
        "labelstudio_url": _labelstudio_url(request, project, config, role),
        **_flag_history(project),
        "labelstudio_refusals": LabelStudioRefusal.objects.filter(project=project).order_by(
            "-created_at", "-pk"
        )[:LABELSTUDIO_REFUSALS_SHOWN],
    }
    return render(request, "active/loop.html", context)


def _flag_history(project: Project) -> dict[str, Any]:
    """The flags' refits, newest first for the table, oldest first for the chart."""
    rows = list(FlagCalibration.objects.filter(project=project).order_by("-created_at", "-id")[:50])
    points = [
        {"at": r.created_at, "precision": r.precision, "recall": r.recall} for r in reversed(rows)
    ]
    # the chart is built from numbers and escaped dates only
    return {"flag_calibrations": rows[:10], "flags_chart": mark_safe(flags_svg(points))}


@login_required
@require_POST
def flags_calibrate(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    job = job_enqueue(
        kind="flags_calibrate",
        params={"project_id": project.pk},
        project=project,
        label="Refit the flags' calibration from reviews",
        created_by=signed_in_user(request),
    )
    messages.success(request, f"Refitting the flags from reviewers' decisions (job #{job.pk}).")
    return redirect("active_loop", project.slug)


def _labelstudio_url(
    request: HttpRequest, project: Project, config: ProjectConfig, role: str
) -> str:
    """The backend URL to give Label Studio. Researchers get it with the webhook secret
    (Label Studio's webhook then authenticates); reviewers, who may read predictions but
    not write captions or start retrains, get it without."""
    path = f"/labelstudio/{project.slug}"
    if role == Role.RESEARCHER:
        path += f"/{config.labelstudio_secret}"
    return request.build_absolute_uri(path)


@login_required
@require_POST
def labelstudio_rotate(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    services.labelstudio_secret_rotate(project=project, user=signed_in_user(request))
    messages.success(
        request,
        "The Label Studio backend URL has a new secret: give Label Studio the URL below "
        "(Settings → Model); the old one no longer works.",
    )
    return redirect("active_loop", project.slug)


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
    if started.job is not None:
        job_queued(request, job=started.job, text=f"Retrain #{started.pk} is queued as {{job}}.")
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
    job_queued(request, job=job, text="Checking the batch's captions as {job}.")
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


def _audio_url(request: HttpRequest, project: Project) -> Callable[[int], str]:
    def url(clip_id: int) -> str:
        return request.build_absolute_uri(reverse("clip_audio", args=[project.slug, clip_id]))

    return url


LABELSTUDIO_README = """A batch of Earmark as a Label Studio project.

1. In Label Studio, create a project; in Labeling Setup choose Code and paste
   label_config.xml.
2. Import tasks.json. Each task plays its clip from Earmark: the browser must be signed in
   to Earmark as a researcher or reviewer of the project (or point "audio" at your own
   copies of the files; keep "clip_id").
3. To have Earmark's model suggest captions and take the captions written there, add
   Earmark as the project's model (the URL and settings are on the project's
   active-learning page); or export the project as JSON and import the file there.
"""


@login_required
@require_GET
def batch_labelstudio(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """The batch as a Label Studio project: a zip of its labelling config and tasks."""
    project, _ = project_for_page(request, slug, *READ)
    batch = get_object_or_404(Batch, project=project, pk=pk)
    tasks = services.labelstudio_tasks(batch=batch, audio_url=_audio_url(request, project))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("label_config.xml", services.labelstudio_config(batch=batch))
        archive.writestr("tasks.json", json.dumps(tasks, indent=1))
        archive.writestr("README.txt", LABELSTUDIO_README)
    response = HttpResponse(buffer.getvalue(), content_type="application/zip")
    name = f"labelstudio-{project.slug}-batch-{batch.pk}.zip"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@accepts_uploads
@login_required
@require_POST
def labelstudio_import(request: HttpRequest, slug: str) -> HttpResponse:
    """Captions from a Label Studio JSON export (an uploaded file)."""
    project, _ = project_for_page(request, slug, *WRITE)
    try:
        name, data = _uploaded_export(request)
        outcome = services.labelstudio_import(
            project=project, data=data, file_name=name, user=signed_in_user(request)
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request,
            f"{name}: {outcome.created} caption(s) imported, {outcome.updated} replaced, "
            f"{outcome.unchanged} already there, from {outcome.annotations} annotation(s); "
            f"{outcome.skipped_tasks} task(s) without a caption.",
        )
    return redirect("active_loop", project.slug)


def _uploaded_export(request: HttpRequest) -> tuple[str, bytes]:
    """The uploaded file's name and bytes, after the checks that need no reading."""
    upload = request.FILES.get("file")
    if upload is None:
        raise ValidationError("Choose the JSON file Label Studio exported.")
    return services.labelstudio_upload_read(upload)
