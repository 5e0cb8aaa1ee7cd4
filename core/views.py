from __future__ import annotations

import hmac
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from core import services
from core.access import annotates_only, project_for_page, signed_in_user
from core.forms import ApiTokenForm, CountryForm, InviteForm, ProjectForm, SignupForm
from core.health import run_checks, unserved_queues
from core.models import ApiToken, Invite, Job, Membership, ProcessExit, Role


class LoginView(auth_views.LoginView):
    """Django's login, landing annotators-only on Work (their screen) rather than on the
    project list, unless the login asked for a page (?next=)."""

    def get_default_redirect_url(self) -> str:
        if annotates_only(self.request.user):
            return reverse("work")
        return super().get_default_redirect_url()


def _job_for(request: HttpRequest, pk: int) -> Job:
    """403 for users who see no jobs at all (as on the jobs list), 404 for others' jobs."""
    if not request.user.has_perm("core.view_job"):
        raise PermissionDenied("Only researchers see jobs.")
    return get_object_or_404(Job.objects.visible_to(signed_in_user(request)), pk=pk)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    memberships = Membership.objects.filter(user=signed_in_user(request)).select_related("project")
    return render(request, "core/home.html", {"memberships": memberships})


@login_required
@permission_required("core.add_project", raise_exception=True)
def project_new(request: HttpRequest) -> HttpResponse:
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            project = services.project_create(
                created_by=signed_in_user(request), **form.cleaned_data
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(project)
    return render(request, "core/project_new.html", {"form": form})


@login_required
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug)
    context: dict[str, object] = {"project": project, "role": role}
    if role in (Role.RESEARCHER, Role.REVIEWER):
        context["memberships"] = project.membership_set.select_related("user").order_by(
            "role", "user__username"
        )
    if role == Role.RESEARCHER:
        context["invites"] = project.invites.all()[:20]
        context["invite_form"] = InviteForm()
        context["jobs"] = Job.objects.filter(project=project)[:10]
    return render(request, "core/project_detail.html", context)


@login_required
@require_POST
def invite_new(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = project_for_page(request, slug, Role.RESEARCHER)
    form = InviteForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Invite not created: {form.errors.as_text()}")
        return redirect(project)
    invite = services.invite_create(
        project=project, created_by=signed_in_user(request), **form.cleaned_data
    )
    messages.success(request, f"Invite link created for {invite.get_role_display().lower()}s.")
    return redirect(project)


@login_required
@require_POST
def invite_revoke(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, Role.RESEARCHER)
    invite = get_object_or_404(Invite, project=project, pk=pk)
    services.invite_revoke(invite=invite)
    messages.success(request, "Invite link revoked.")
    return redirect(project)


def invite_accept(request: HttpRequest, token: str) -> HttpResponse:
    invite = get_object_or_404(Invite.objects.select_related("project"), token=token)
    reason = invite.unusable_reason()
    form = None if request.user.is_authenticated else SignupForm(request.POST or None)
    if request.method == "POST" and not reason:
        if form is not None:
            if not form.is_valid():
                return render(request, "core/invite_accept.html", {"invite": invite, "form": form})
            with transaction.atomic():
                user = form.save()
                services.profile_country_set(user=user, country=form.cleaned_data["country"])
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        try:
            services.invite_accept(token=token, user=signed_in_user(request))
        except ValidationError as exc:
            reason = "; ".join(exc.messages)
        else:
            messages.success(request, f"Welcome to {invite.project.name}.")
            return redirect(invite.project)
    return render(
        request, "core/invite_accept.html", {"invite": invite, "form": form, "reason": reason}
    )


@login_required
def account(request: HttpRequest) -> HttpResponse:
    """The signed-in user's own settings: the country they declare."""
    user = signed_in_user(request)
    initial = {"country": services.profile_country(user=user)}
    form = CountryForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            services.profile_country_set(user=user, country=form.cleaned_data["country"])
        except ValidationError as exc:
            form.add_error("country", exc.messages)
        else:
            messages.success(request, "Country saved.")
            return redirect("account")
    return render(request, "core/account.html", {"form": form})


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm("core.view_job"):
        raise PermissionDenied("Only researchers see jobs.")
    jobs = Job.objects.visible_to(signed_in_user(request)).select_related("project", "created_by")
    state = request.GET.get("state", "")
    if state in Job.State.values:
        jobs = jobs.filter(state=state)
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    waiting = Job.objects.visible_to(signed_in_user(request)).filter(state=Job.State.QUEUED)
    queues = sorted(set(waiting.order_by().values_list("queue", flat=True).distinct()))
    context = {
        "page": page,
        "state": state,
        "states": Job.State.choices,
        "unserved": unserved_queues(queues),
        "process_exits": ProcessExit.objects.recent()[:10],
    }
    return render(request, "core/job_list.html", context)


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job_for(request, pk)
    unserved = unserved_queues([job.queue]) if job.state == Job.State.QUEUED else []
    return render(request, "core/job_detail.html", {"job": job, "unserved": unserved})


@login_required
@require_POST
def job_retry(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job_for(request, pk)
    try:
        new_job = services.job_retry(job=job, user=signed_in_user(request))
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
        return redirect(job)
    messages.success(request, f"Retrying as job #{new_job.pk}.")
    return redirect(new_job)


@login_required
@require_POST
def job_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job_for(request, pk)
    try:
        services.job_cancel(job=job)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    return redirect(job)


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    user = signed_in_user(request)
    form = ApiTokenForm(request.POST or None)
    new_key = None
    if request.method == "POST" and form.is_valid():
        days = form.cleaned_data["expires_in_days"]
        _, new_key = services.api_token_create(
            user=user,
            name=form.cleaned_data["name"],
            expires_at=timezone.now() + timedelta(days=days) if days else None,
            read_only=form.cleaned_data["read_only"],
        )
        form = ApiTokenForm()
    tokens = ApiToken.objects.filter(user=user)
    return render(
        request, "core/token_list.html", {"form": form, "tokens": tokens, "new_key": new_key}
    )


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, user=request.user, pk=pk)
    services.api_token_revoke(token=token)
    messages.success(request, f"Token {token.name!r} revoked.")
    return redirect("token_list")


def _may_read_health_details(request: HttpRequest) -> bool:
    """Staff signed in, or monitoring sending `Authorization: Bearer <HEALTHZ_TOKEN>`."""
    if request.user.is_authenticated and request.user.is_staff:
        return True
    token = settings.HEALTHZ_TOKEN
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(sent.encode(), token.encode())


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 or 503 and whether each check passed, for anyone (load balancers); what each
    check found (versions, hosts, errors) only for staff and monitoring."""
    ok, checks = run_checks(details=_may_read_health_details(request))
    return JsonResponse(
        {"status": "ok" if ok else "down", "checks": checks}, status=200 if ok else 503
    )
