from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.models import Caption
from core.access import project_for_page, signed_in_user
from core.flash import job_queued
from core.models import Job, Project, Role
from core.services import job_enqueue
from postprocessing import services
from postprocessing.languagetool import describe
from postprocessing.models import ProcessedCaption, StepStatus
from postprocessing.pipeline import STEPS


def _caption_for(project: Project, pk: int) -> Caption:
    """Only captions of this project; any other id is a 404, whoever asks."""
    try:
        return services.caption_for_project(project=project, caption_id=pk)
    except Caption.DoesNotExist:
        raise Http404("No such caption in this project.") from None


@login_required
def overview(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, Role.RESEARCHER, Role.REVIEWER)
    in_project = services.project_captions(project).values("pk")
    processed = ProcessedCaption.objects.filter(caption__in=in_project)
    corrections = processed.filter(grammar_status=StepStatus.APPLIED) | processed.filter(
        grammar_reverted=True
    )
    page = Paginator(corrections.select_related("caption").order_by("-processed_at", "-pk"), 50)
    context = {
        "project": project,
        "role": role,
        "counts": {
            "approved": services.approved_captions().filter(pk__in=in_project).count(),
            "processed": processed.count(),
            "pending": services.captions_pending(project=project).count(),
            "grammar_applied": processed.filter(grammar_status=StepStatus.APPLIED).count(),
            "grammar_skipped": processed.filter(grammar_status=StepStatus.SKIPPED).count(),
            "grammar_reverted": processed.filter(grammar_reverted=True).count(),
        },
        "languagetool": describe(services.grammar_config()),
        "vocabulary_size": project.vocabulary.count(),
        "top_tokens": project.vocabulary.all()[:40],
        "page": page.get_page(request.GET.get("page")),
        "jobs": Job.objects.filter(
            project=project, kind__in=["captions_postprocess", "vocabulary_rebuild"]
        )[:5],
    }
    return render(request, "postprocessing/overview.html", context)


@login_required
@require_POST
def run(request: HttpRequest, slug: str) -> HttpResponse:
    """Researchers start post-processing (pending captions) or a vocabulary rebuild."""
    project, _ = project_for_page(request, slug, Role.RESEARCHER)
    if request.POST.get("what") == "vocabulary":
        kind, params = "vocabulary_rebuild", {"project_id": project.pk}
    else:
        kind, params = "captions_postprocess", {"project_id": project.pk}
    job = job_enqueue(kind=kind, params=params, created_by=signed_in_user(request), project=project)
    job_queued(request, job=job, text=f"{job.label}: queued as {{job}}.")
    return redirect("postprocessing_overview", slug=project.slug)


@login_required
def caption_processing(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_for_page(request, slug, Role.RESEARCHER, Role.REVIEWER)
    caption = _caption_for(project, pk)
    context = {
        "project": project,
        "role": role,
        "caption": caption,
        "processed": getattr(caption, "processed", None),
        "step_labels": STEPS,
    }
    template = "postprocessing/_steps.html" if request.GET.get("partial") else None
    return render(request, template or "postprocessing/caption.html", context)


@login_required
@require_POST
def grammar_revert(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, Role.RESEARCHER, Role.REVIEWER)
    caption = _caption_for(project, pk)
    processed = getattr(caption, "processed", None)
    if processed is None:
        messages.error(request, "This caption has not been post-processed yet.")
    else:
        try:
            services.processed_grammar_revert(
                processed=processed, project=project, user=signed_in_user(request)
            )
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, "Grammar correction reverted for this caption.")
    return redirect(reverse("caption_processing", args=[project.slug, caption.pk]))
