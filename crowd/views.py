from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from annotation import services as annotation_services
from annotation.models import Assignment, Batch, Caption
from core.access import project_for_page, signed_in_user
from core.models import Project, Role
from crowd import services
from crowd.forms import (
    BlockForm,
    BonusForm,
    FeedbackForm,
    GradeForm,
    QualificationForm,
    RejectForm,
    RequirementsForm,
    UnblockForm,
)
from crowd.models import (
    REASON_FEEDBACK,
    REVIEWERS,
    BatchRequirements,
    Block,
    Flag,
    LedgerDiscrepancy,
    LedgerEntry,
    Qualification,
    QualificationAttempt,
    QualificationClip,
)
from crowd.queries import blocks_of, worker_record
from curation.models import Label
from curation.serving import clip_audio_response

QUEUE_PAGE = 20
IMPORTED_SHOWN = 50  # captions from Label Studio waiting, on the review page


def _messages(exc: ValidationError) -> str:
    return " ".join(exc.messages)


def _back(request: HttpRequest, default: str) -> HttpResponse:
    """Back to the page the form was on (a queue with its filters), never off the site."""
    target = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return redirect(target if target and safe else default)


def _numbered_fields(request: HttpRequest, prefix: str) -> dict[int, str]:
    """The posted fields named `prefix` + a number (fix-12, gold-3), by that number."""
    return {
        int(key.removeprefix(prefix)): request.POST.get(key, "")
        for key in request.POST
        if key.startswith(prefix) and key.removeprefix(prefix).isdigit()
    }


def _project_assignment(project: Project, pk: int) -> Assignment:
    assignments = Assignment.objects.select_related("hit__batch__project", "worker")
    return get_object_or_404(assignments, pk=pk, hit__batch__project=project)


def _worker_for(project: Project, user_id: int) -> Any:
    return get_object_or_404(services.project_workers(project=project), pk=user_id)


# Review --------------------------------------------------------------------------------


@login_required
@require_GET
def review_queue(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, *REVIEWERS)
    queue = services.review_queue(project=project)
    batches = project.batches.order_by("-created_at")
    workers = services.project_workers(project=project).order_by("username")
    batch_id, worker_id = request.GET.get("batch", ""), request.GET.get("worker", "")
    if batch_id.isdigit():
        queue = queue.filter(hit__batch_id=int(batch_id))
    if worker_id.isdigit():
        queue = queue.filter(worker_id=int(worker_id))
    captions = Caption.objects.select_related("clip").prefetch_related(
        Prefetch("clip__labels", queryset=Label.objects.select_related("word_label")),
        Prefetch("flags", queryset=Flag.objects.order_by("created_at")),
    )
    queue = queue.prefetch_related(
        Prefetch("captions", queryset=captions.order_by("id")), "video_hints", "listens"
    )
    page = Paginator(queue, QUEUE_PAGE).get_page(request.GET.get("page"))
    context = {
        "project": project,
        "role": role,
        "page": page,
        "cards": [_card(a) for a in page.object_list],
        "batches": batches,
        "workers": workers,
        "batch_id": batch_id,
        "worker_id": worker_id,
        "imported": services.imported_queue(project=project)[:IMPORTED_SHOWN],
        "reject_form": RejectForm(),
        "reason_feedback": REASON_FEEDBACK,
        "here": request.get_full_path(),
    }
    return render(request, "crowd/review_queue.html", context)


def _card(assignment: Assignment) -> dict[str, Any]:
    batch = assignment.hit.batch
    submitted = assignment.submitted_at
    # the HIT page's log: when the worker opened a clip's video hint, and whether they
    # heard the clip to the end before writing
    video_opened = {v.clip_id: v.opened_at for v in assignment.video_hints.all()}
    heard = {listen.clip_id for listen in assignment.listens.all()}
    return {
        "assignment": assignment,
        "batch": batch,
        "auto_approve_at": submitted + batch.auto_approve_delay if submitted else None,
        "captions": [
            {
                "caption": caption,
                "hints": _hints(caption.clip.labels.all()),
                "flags": list(caption.flags.all()),
                "video_opened_at": video_opened.get(caption.clip_id),
                "heard": caption.clip_id in heard,
            }
            for caption in assignment.captions.all()
        ],
    }


def _hints(labels: Any) -> list[dict[str, str]]:
    """Word hints as the worker saw them: the word label, with the ontology description."""
    hints: dict[str, str] = {}
    for label in labels:
        hints.setdefault(label.word, label.description)
    return [{"word": w, "description": d} for w, d in sorted(hints.items())]


@login_required
@require_POST
def review_imported(request: HttpRequest, slug: str, pk: int, decision: str) -> HttpResponse:
    """Approves ("approve") or rejects ("reject") a caption written in Label Studio."""
    project, _ = project_for_page(request, slug, *REVIEWERS)
    if decision not in ("approve", "reject"):
        raise Http404("No such decision.")
    # another project's caption, or one no longer waiting, is not found here
    get_object_or_404(services.imported_queue(project=project), pk=pk)
    try:
        services.imported_caption_review(
            project=project,
            caption_id=pk,
            reviewer=signed_in_user(request),
            approve=decision == "approve",
        )
    except ValidationError as exc:
        messages.error(request, _messages(exc))
    else:
        done = "approved into the corpus" if decision == "approve" else "rejected"
        messages.success(request, f"Caption #{pk} {done}.")
    return _back(request, reverse("review_queue", args=[slug]))


@login_required
@require_POST
def review_approve(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *REVIEWERS)
    assignment = _project_assignment(project, pk)
    form = FeedbackForm(request.POST)
    feedback = form.cleaned_data["feedback"] if form.is_valid() else ""
    try:
        services.review_approve(
            assignment=assignment, reviewer=signed_in_user(request), feedback=feedback
        )
    except ValidationError as exc:
        messages.error(request, f"Assignment #{pk} not approved: {_messages(exc)}")
    else:
        messages.success(request, f"Approved {assignment.worker}'s assignment #{pk}.")
    return _back(request, reverse("review_queue", args=[slug]))


@login_required
@require_POST
def review_reject(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *REVIEWERS)
    assignment = _project_assignment(project, pk)
    form = RejectForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Assignment #{pk} not rejected: choose a reason.")
        return _back(request, reverse("review_queue", args=[slug]))
    try:
        services.review_reject(
            assignment=assignment, reviewer=signed_in_user(request), **form.cleaned_data
        )
    except ValidationError as exc:
        messages.error(request, f"Assignment #{pk} not rejected: {_messages(exc)}")
    else:
        messages.success(
            request, f"Rejected assignment #{pk}; its slot is open for another worker."
        )
    return _back(request, reverse("review_queue", args=[slug]))


@login_required
@require_POST
def review_fix(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """Fixes the text of the assignment's captions (both versions kept), then approves."""
    project, _ = project_for_page(request, slug, *REVIEWERS)
    assignment = _project_assignment(project, pk)
    fixes = _numbered_fields(request, "fix-")
    try:
        services.review_approve(
            assignment=assignment, reviewer=signed_in_user(request), fixes=fixes
        )
    except ValidationError as exc:
        messages.error(request, f"Assignment #{pk} not fixed: {_messages(exc)}")
    else:
        fixed = assignment.captions.exclude(fixed_text="").count()
        if fixed:
            messages.success(request, f"Fixed and approved assignment #{pk}.")
        else:
            messages.success(request, f"Approved assignment #{pk}; its text was not changed.")
    return _back(request, reverse("review_queue", args=[slug]))


# Workers -------------------------------------------------------------------------------


@login_required
@require_GET
def worker_list(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, *REVIEWERS)
    rows = services.worker_summaries(project=project)
    return render(
        request, "crowd/worker_list.html", {"project": project, "role": role, "rows": rows}
    )


@login_required
@require_GET
def worker_detail(request: HttpRequest, slug: str, user_id: int) -> HttpResponse:
    project, role = project_for_page(request, slug, *REVIEWERS)
    worker = _worker_for(project, user_id)
    history = (
        Assignment.objects.filter(hit__batch__project=project, worker=worker)
        .select_related("hit__batch", "review")
        .prefetch_related("captions")
        .order_by("-accepted_at", "-id")
    )
    context = {
        "project": project,
        "role": role,
        "worker": worker,
        "summary": services.worker_summary(project=project, worker=worker),
        # this project's reviews only: another project's record is not this one's business
        "record": worker_record(worker=worker, project=project),
        # not "block": the {% block %} tag puts its own "block" in the context
        "active_block": Block.objects.active().filter(project=project, worker=worker).first(),
        "blocks": Block.objects.filter(project=project, worker=worker).select_related(
            "blocked_by", "lifted_by"
        ),
        "history": Paginator(history, 50).get_page(request.GET.get("page")),
        "ledger": LedgerEntry.objects.filter(project=project, worker=worker).select_related(
            "batch"
        )[:100],
        # one page, three forms with a "reason": distinct ids keep each label on its field
        "block_form": BlockForm(auto_id="block_%s"),
        "unblock_form": UnblockForm(auto_id="unblock_%s"),
        "bonus_form": BonusForm(auto_id="bonus_%s", batches=_batches_worked(project, worker)),
    }
    return render(request, "crowd/worker_detail.html", context)


@login_required
@require_POST
def worker_approve_all(request: HttpRequest, slug: str, user_id: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *REVIEWERS)
    worker = _worker_for(project, user_id)
    try:
        n = services.worker_approve_all(
            project=project, worker=worker, reviewer=signed_in_user(request)
        )
    except ValidationError as exc:
        messages.error(request, f"Nothing approved: {_messages(exc)}")
    else:
        messages.success(request, f"Approved {n} assignment{'s' if n != 1 else ''} of {worker}.")
    return redirect("worker_detail", slug, user_id)


@login_required
@require_POST
def worker_block(request: HttpRequest, slug: str, user_id: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *REVIEWERS)
    worker = _worker_for(project, user_id)
    form = BlockForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError("Say why: the worker is shown the reason.")
        services.worker_block(
            project=project,
            worker=worker,
            by=signed_in_user(request),
            reason=form.cleaned_data["reason"],
        )
    except ValidationError as exc:
        messages.error(request, f"Not blocked: {_messages(exc)}")
    else:
        messages.success(request, f"{worker} is blocked and gets no more HITs of {project}.")
    return redirect("worker_detail", slug, user_id)


@login_required
@require_POST
def worker_unblock(request: HttpRequest, slug: str, user_id: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *REVIEWERS)
    worker = _worker_for(project, user_id)
    form = UnblockForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        services.worker_unblock(
            project=project, worker=worker, by=signed_in_user(request), reason=reason
        )
    except ValidationError as exc:
        messages.error(request, _messages(exc))
    else:
        messages.success(request, f"{worker} may work on {project} again.")
    return redirect("worker_detail", slug, user_id)


def _batches_worked(project: Project, worker: User) -> QuerySet[Batch]:
    return Batch.objects.filter(project=project, hits__assignments__worker=worker).distinct()


@login_required
@require_POST
def worker_bonus(request: HttpRequest, slug: str, user_id: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *REVIEWERS)
    worker = _worker_for(project, user_id)
    form = BonusForm(request.POST, batches=_batches_worked(project, worker))
    try:
        if not form.is_valid():
            raise ValidationError(f"Check the bonus: {form.errors.as_text()}")
        entry, created = services.bonus_pay(
            project=project, worker=worker, by=signed_in_user(request), **form.cleaned_data
        )
    except ValidationError as exc:
        messages.error(request, f"No bonus paid: {_messages(exc)}")
    else:
        dollars = f"${entry.amount_cents / 100:.2f}"
        if created:
            messages.success(request, f"Paid {worker} a bonus of {dollars}.")
        else:
            messages.info(request, f"That bonus of {dollars} was already paid; not paid twice.")
    return redirect("worker_detail", slug, user_id)


# Money ---------------------------------------------------------------------------------


@login_required
@require_GET
def ledger(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, Role.RESEARCHER)
    entries = LedgerEntry.objects.filter(project=project).select_related(
        "worker", "batch", "paid_by"
    )
    page = Paginator(entries, 100).get_page(request.GET.get("page"))
    context = {
        "project": project,
        "role": role,
        "totals": services.ledger_totals(project=project),
        "entries": page,
        "paid_there": services.bonuses_paid_there(entries=page.object_list),
        "discrepancies": LedgerDiscrepancy.objects.filter(project=project)[:200],
    }
    return render(request, "crowd/ledger.html", context)


@login_required
@require_GET
def ledger_csv(request: HttpRequest, slug: str) -> StreamingHttpResponse:
    project, _ = project_for_page(request, slug, Role.RESEARCHER)
    response = StreamingHttpResponse(
        services.ledger_csv(project=project, user=signed_in_user(request)), content_type="text/csv"
    )
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-ledger.csv"'
    return response


# Qualifications and batch requirements (reviewers, researchers) ------------------------


@login_required
def qualification_list(request: HttpRequest, slug: str) -> HttpResponse:
    roles = [Role.RESEARCHER] if request.method == "POST" else list(REVIEWERS)
    project, role = project_for_page(request, slug, *roles)
    form = QualificationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            qualification = services.qualification_create(
                project=project, created_by=signed_in_user(request), **form.cleaned_data
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Qualification {qualification.name!r} created.")
            return redirect(qualification)
    qualifications = project.qualifications.annotate(
        n_clips=Count("items", distinct=True),
        n_waiting=Count("attempts", filter=Q(attempts__state="submitted"), distinct=True),
        n_passed=Count("attempts", filter=Q(attempts__state="approved"), distinct=True),
    )
    context = {"project": project, "role": role, "form": form, "qualifications": qualifications}
    return render(request, "crowd/qualification_list.html", context)


@login_required
def qualification_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    roles = [Role.RESEARCHER] if request.method == "POST" else list(REVIEWERS)
    project, role = project_for_page(request, slug, *roles)
    qualification = get_object_or_404(Qualification, project=project, pk=pk)
    if request.method == "POST":
        golds = _numbered_fields(request, "gold-")
        try:
            n = services.qualification_set_gold(
                qualification=qualification, by=signed_in_user(request), golds=golds
            )
        except ValidationError as exc:
            messages.error(request, _messages(exc))
        else:
            messages.success(request, f"{n} gold caption{'s' if n != 1 else ''} saved.")
        return redirect(qualification)
    context = {
        "project": project,
        "role": role,
        "qualification": qualification,
        "items": qualification.items.select_related("clip"),
        "attempts": qualification.attempts.select_related("worker", "reviewer"),
    }
    return render(request, "crowd/qualification_detail.html", context)


def _attempt_for(project: Project, pk: int) -> QualificationAttempt:
    attempts = QualificationAttempt.objects.select_related("qualification__project", "worker")
    return get_object_or_404(attempts, pk=pk, qualification__project=project)


@login_required
@require_GET
def attempt_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_for_page(request, slug, *REVIEWERS)
    attempt = _attempt_for(project, pk)
    answers = {a.clip_id: a.text for a in attempt.answers.all()}
    items = [
        {"item": item, "answer": answers.get(item.clip_id, "")}
        for item in attempt.qualification.items.select_related("clip")
    ]
    context = {
        "project": project,
        "role": role,
        "attempt": attempt,
        "items": items,
        "form": GradeForm(),
    }
    return render(request, "crowd/attempt_detail.html", context)


@login_required
@require_POST
def attempt_grade(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *REVIEWERS)
    attempt = _attempt_for(project, pk)
    form = GradeForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError("Choose pass or fail.")
        attempt = services.qualification_grade(
            attempt=attempt,
            reviewer=signed_in_user(request),
            approve=form.cleaned_data["decision"] == "approve",
            feedback=form.cleaned_data["feedback"],
        )
    except ValidationError as exc:
        messages.error(request, f"Not graded: {_messages(exc)}")
        return redirect(attempt)
    messages.success(request, f"{attempt.worker}: {attempt.get_state_display().lower()}.")
    return redirect(attempt.qualification)


@login_required
def batch_requirements(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    roles = [Role.RESEARCHER] if request.method == "POST" else list(REVIEWERS)
    project, role = project_for_page(request, slug, *roles)
    batch = get_object_or_404(Batch, project=project, pk=pk)
    current = BatchRequirements.objects.filter(batch=batch).first()
    initial: dict[str, Any] = {}
    if current is not None:
        initial = {
            "qualifications": list(current.qualifications.all()),
            "min_approval_percent": current.min_approval_percent,
            "min_approved": current.min_approved,
            "site_wide_record": current.site_wide_record,
            "locales": " ".join(current.locales.values_list("country", flat=True)),
        }
    form = RequirementsForm(request.POST or None, initial=initial, project=project)
    if request.method == "POST" and form.is_valid():
        try:
            services.batch_requirements_set(
                batch=batch, by=signed_in_user(request), **form.cleaned_data
            )
        except ValidationError as exc:
            by_field = exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}
            for field, errors in by_field.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, "Requirements saved; they apply from the next claim.")
            return redirect("batch_requirements", slug, pk)
    context = {"project": project, "role": role, "batch": batch, "form": form}
    return render(request, "crowd/batch_requirements.html", context)


# Workers' own pages --------------------------------------------------------------------


def _annotated_qualification(request: HttpRequest, pk: int) -> Qualification:
    """A qualification of a project where the user annotates; 404 for anyone else."""
    return get_object_or_404(
        Qualification.objects.select_related("project"),
        pk=pk,
        project__membership__user=request.user,
        project__membership__role=Role.ANNOTATOR,
    )


@login_required
@require_GET
def my_qualifications(request: HttpRequest) -> HttpResponse:
    context = {
        "rows": services.qualifications_for(worker=signed_in_user(request)),
        "record": worker_record(worker=signed_in_user(request)),
        "blocks": blocks_of(worker=signed_in_user(request)),
    }
    return render(request, "crowd/my_qualifications.html", context)


@login_required
def qualification_take(request: HttpRequest, pk: int) -> HttpResponse:
    qualification = _annotated_qualification(request, pk)
    worker = signed_in_user(request)
    attempts = qualification.attempts.filter(worker=worker)
    live = attempts.exclude(state=QualificationAttempt.State.REJECTED).first()
    texts: dict[int, str] = {}
    errors: dict[str, list[str]] = {}
    if request.method == "POST" and live is None:
        texts = _numbered_fields(request, "caption-")
        try:
            services.qualification_submit(qualification=qualification, worker=worker, answers=texts)
        except ValidationError as exc:
            errors = exc.message_dict if hasattr(exc, "error_dict") else {"__all__": exc.messages}
        else:
            messages.success(request, "Thank you! A reviewer will grade your answers.")
            return redirect("my_qualifications")
    items = [
        {
            "number": number,
            "clip": item.clip,
            "text": texts.get(item.clip_id, ""),
            "errors": errors.get(f"caption-{item.clip_id}", []),
        }
        for number, item in enumerate(qualification.items.select_related("clip"), start=1)
    ]
    context = {
        "qualification": qualification,
        "live": live,
        "last": attempts.first(),
        "items": items,
        "general_errors": errors.get("__all__", []),
    }
    return render(request, "crowd/qualification_take.html", context)


@login_required
@require_GET
def qualification_clip_audio(request: HttpRequest, pk: int, clip_id: int) -> HttpResponseBase:
    qualification = _annotated_qualification(request, pk)
    item = get_object_or_404(
        QualificationClip.objects.select_related("clip"),
        qualification=qualification,
        clip_id=clip_id,
    )
    return clip_audio_response(request, item.clip)


@login_required
@require_GET
def my_earnings(request: HttpRequest) -> HttpResponse:
    """The worker's own ledger; it names no other worker and no reviewer."""
    worker = signed_in_user(request)
    entries = LedgerEntry.objects.filter(worker=worker).select_related("project", "batch")
    context = {
        "entries": Paginator(entries, 50).get_page(request.GET.get("page")),
        "summary": annotation_services.worker_summary(worker=worker),
        "record": worker_record(worker=worker),
    }
    return render(request, "crowd/my_earnings.html", context)


@login_required
@require_GET
def work_blocked(request: HttpRequest) -> HttpResponse:
    blocks = blocks_of(worker=signed_in_user(request))
    return render(request, "crowd/blocked.html", {"blocks": blocks})
