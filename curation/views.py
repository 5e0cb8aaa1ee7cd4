"""Curation pages: ontology, recipes, subsets, clips. Researchers edit; reviewers read.

Every view loads the project through core.access.project_for_page (404 for non-members, 403 for
annotators), then its objects through the project, so a slug from another project is a 404.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.text import slugify
from django.views.decorators.gzip import gzip_page
from django.views.decorators.http import require_GET, require_POST

from core.access import project_for_page, signed_in_user
from core.flash import job_queued
from core.jobs import JOB_KINDS
from core.media import media_response
from core.models import Project, Role
from core.services import job_enqueue
from core.uploads import accepts_uploads
from curation import audiocaps, queries, services
from curation.forms import (
    ArchiveUploadForm,
    BuildForm,
    LabelCurateForm,
    NewRecipeForm,
    RecipeForm,
    RecipeUploadForm,
)
from curation.models import Clip, Label, Recipe, Split, Subset, SuperCategory
from curation.recipes import RecipeError
from curation.serving import clip_audio_response

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)
CLIPS_PER_PAGE = 50


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _recipe_for(
    request: HttpRequest, slug: str, recipe_slug: str, *roles: str
) -> tuple[Recipe, Role]:
    project, role = project_for_page(request, slug, *roles)
    recipe = get_object_or_404(
        Recipe.objects.select_related("project"), project=project, slug=recipe_slug
    )
    return recipe, role


def _subset_for(
    request: HttpRequest, slug: str, subset_slug: str, *roles: str
) -> tuple[Subset, Role]:
    project, role = project_for_page(request, slug, *roles)
    subset = get_object_or_404(
        Subset.objects.select_related("project", "recipe"), project=project, slug=subset_slug
    )
    return subset, role


# Ontology -------------------------------------------------------------------------------


@login_required
@require_GET
@gzip_page  # 632 labels with their forms: ~850 KB of HTML, ~60 KB compressed
def ontology(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, *READ)
    q = request.GET.get("q", "").strip()
    tree = queries.ontology_tree(project=project, q=q, focus=_int(request.GET.get("focus")))
    context = {
        "project": project,
        "role": role,
        "tree": tree,
        "q": q,
        "lists": queries.SEGMENT_LISTS,
        "can_edit": role == Role.RESEARCHER,
        # the word labels are the shared ontology's: only staff import them
        "can_import_words": signed_in_user(request).is_staff,
        "audiocaps_flags": services.label_flags_applied(project=project),
        "audiocaps_words": services.word_labels_loaded(),
    }
    return render(request, "curation/ontology.html", context)


@login_required
@require_POST
def label_flags_apply(request: HttpRequest, slug: str) -> HttpResponse:
    """Sets the bundled AudioCaps flags (visual-only, expert-only labels) on this project."""
    project, _ = project_for_page(request, slug, *WRITE)
    try:
        result = services.label_flags_apply(project=project)
    except ValidationError as exc:
        messages.error(request, f"AudioCaps flags not applied: {'; '.join(exc.messages)}")
    else:
        messages.success(
            request,
            f"AudioCaps flags applied to {result['labels']} labels ({result['changed']} changed).",
        )
    return redirect("ontology", slug)


@login_required
@require_POST
def word_labels_import_audiocaps(request: HttpRequest) -> HttpResponse:
    """Imports the bundled AudioCaps word labels, then goes back to `next` (the ontology
    page it was asked from). Word labels are the shared ontology's (every project's hints
    and word-label preferences read them), so only staff may."""
    if not signed_in_user(request).is_staff:
        raise PermissionDenied("Word labels are shared by every project; staff import them.")
    try:
        result = services.word_labels_import(path=audiocaps.WORD_LABELS)
    except ValidationError as exc:
        messages.error(request, f"AudioCaps word labels not imported: {'; '.join(exc.messages)}")
    else:
        messages.success(
            request,
            f"AudioCaps word labels imported: {result['words']} words covering "
            f"{result['labels']} AudioSet labels.",
        )
    target = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return redirect(target if safe else "home")


@login_required
@require_POST
def label_curate(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    label = get_object_or_404(Label, pk=pk)
    form = LabelCurateForm(request.POST)
    if form.is_valid():
        services.label_curate(project=project, label=label, **form.cleaned_data)
        messages.success(request, f"Saved the curation of {label.name}.")
    else:
        messages.error(request, f"{label.name} not saved: {form.errors.as_text()}")
    params: dict[str, int | str] = {"focus": label.pk}
    if request.POST.get("q"):
        params["q"] = request.POST["q"]
    # back to the same label, opened, in the same search
    return redirect(f"{reverse('ontology', args=[slug])}?{urlencode(params)}#label-{label.pk}")


# Recipes --------------------------------------------------------------------------------


def _recipe_list_page(
    request: HttpRequest, project: Project, role: Role, new_form: NewRecipeForm | None = None
) -> HttpResponse:
    recipes = project.recipes.annotate(n_subsets=Count("subsets"))
    context = {
        "project": project,
        "role": role,
        "recipes": recipes,
        "can_edit": role == Role.RESEARCHER,
        "new_form": new_form or NewRecipeForm(),
        "upload_form": RecipeUploadForm(),
    }
    return render(request, "curation/recipe_list.html", context)


@login_required
@require_GET
def recipe_list(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, *READ)
    return _recipe_list_page(request, project, role)


@login_required
@require_POST
def recipe_new(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, *WRITE)
    form = NewRecipeForm(request.POST)
    if form.is_valid():
        name = form.cleaned_data["name"]
        if project.recipes.filter(slug=slugify(name)[:80]).exists():
            form.add_error("name", "This project already has a recipe with that name.")
        else:
            try:
                recipe = services.recipe_save(
                    project=project, name=name, spec=form.spec(), created_by=signed_in_user(request)
                )
            except ValidationError as exc:
                form.add_error("name", exc)
            else:
                messages.success(request, f"Recipe {recipe.name} created.")
                return redirect("recipe_detail", slug, recipe.slug)
    return _recipe_list_page(request, project, role, new_form=form)


def _uploaded_recipe(request: HttpRequest) -> tuple[Any, str]:
    """(spec, name) of the uploaded recipe file; ValidationError says what is wrong."""
    form = RecipeUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        raise ValidationError("Choose a .toml or .json recipe file to import.")
    upload = form.cleaned_data["file"]
    # one byte over the limit is enough for recipe_parse to refuse it, unread beyond that
    data = upload.read(services.RECIPE_FILE_MAX_BYTES + 1)
    return services.recipe_parse(filename=upload.name, data=data)


@accepts_uploads
@login_required
@require_POST
def recipe_import(request: HttpRequest, slug: str) -> HttpResponse:
    project, _ = project_for_page(request, slug, *WRITE)
    try:
        spec, name = _uploaded_recipe(request)
        replaced = project.recipes.filter(slug=slugify(name)[:80]).exists()
        recipe = services.recipe_save(
            project=project, name=name, spec=spec, created_by=signed_in_user(request)
        )
    except ValidationError as exc:
        messages.error(request, f"Not imported: {'; '.join(exc.messages)}")
        return redirect("recipe_list", slug)
    messages.success(request, f"{'Replaced' if replaced else 'Imported'} recipe {recipe.name}.")
    return redirect("recipe_detail", slug, recipe.slug)


@login_required
def recipe_detail(request: HttpRequest, slug: str, recipe_slug: str) -> HttpResponse:
    roles = WRITE if request.method == "POST" else READ
    recipe, role = _recipe_for(request, slug, recipe_slug, *roles)
    initial = RecipeForm.initial_for(recipe.name, recipe.spec)
    form = RecipeForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        assert form.spec is not None  # RecipeForm.clean() sets it whenever the form is valid
        try:
            services.recipe_save(
                project=recipe.project,
                name=form.cleaned_data["name"],
                spec=form.spec,
                slug=recipe.slug,
                created_by=recipe.created_by,
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, "Recipe saved.")
            return redirect("recipe_detail", slug, recipe.slug)
    can_edit = role == Role.RESEARCHER
    for field in form.fields.values():
        field.disabled = not can_edit
    context = {
        "project": recipe.project,
        "role": role,
        "recipe": recipe,
        "form": form,
        "can_edit": can_edit,
        "upload_form": RecipeUploadForm(),
        "build_form": BuildForm(),
        "subsets": recipe.subsets.all()[:10],
    }
    return render(request, "curation/recipe_detail.html", context)


@login_required
@require_GET
def recipe_export(request: HttpRequest, slug: str, recipe_slug: str, fmt: str) -> HttpResponse:
    recipe, _ = _recipe_for(request, slug, recipe_slug, *READ)
    if fmt not in ("toml", "json"):
        raise Http404("Recipes export as .toml or .json.")
    try:
        text = services.recipe_export(recipe=recipe, fmt=fmt)
    except (RecipeError, TypeError) as exc:
        messages.error(request, f"Cannot export {recipe.name}: {exc}")
        return redirect("recipe_detail", slug, recipe.slug)
    content_type = "application/toml" if fmt == "toml" else "application/json"
    response = HttpResponse(text, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{recipe.slug}.{fmt}"'
    return response


@accepts_uploads
@login_required
@require_POST
def recipe_upload(request: HttpRequest, slug: str, recipe_slug: str) -> HttpResponse:
    """Replaces this recipe's spec with an uploaded file's; the name and address stay."""
    recipe, _ = _recipe_for(request, slug, recipe_slug, *WRITE)
    try:
        spec, _ = _uploaded_recipe(request)
        services.recipe_save(
            project=recipe.project,
            name=recipe.name,
            spec=spec,
            slug=recipe.slug,
            created_by=recipe.created_by,
        )
    except ValidationError as exc:
        messages.error(request, f"Not imported: {'; '.join(exc.messages)}")
    else:
        messages.success(request, "Recipe replaced by the uploaded file.")
    return redirect("recipe_detail", slug, recipe.slug)


@login_required
@require_POST
def recipe_build(request: HttpRequest, slug: str, recipe_slug: str) -> HttpResponse:
    recipe, _ = _recipe_for(request, slug, recipe_slug, *WRITE)
    form = BuildForm(request.POST)
    name = form.cleaned_data["name"].strip() if form.is_valid() else ""
    job = job_enqueue(
        kind="subset_build",
        params={"recipe_id": recipe.pk, "name": name},
        project=recipe.project,
        created_by=signed_in_user(request),
        label=f"Build subset from {recipe.name}",
    )
    job_queued(request, job=job, text=f"Building a subset from {recipe.name} as {{job}}.")
    return redirect(job)


# Subsets --------------------------------------------------------------------------------


@login_required
@require_GET
def subset_list(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, *READ)
    subsets = list(project.subsets.select_related("recipe").defer("report", "spec"))
    counts = queries.subset_clip_counts(subsets)
    # (subset, clips, ready clips) per table row
    rows = [(subset, *counts.get(subset.pk, (0, 0))) for subset in subsets]
    context = {"project": project, "role": role, "rows": rows}
    return render(request, "curation/subset_list.html", context)


@login_required
@require_GET
def subset_detail(request: HttpRequest, slug: str, subset_slug: str) -> HttpResponse:
    subset, role = _subset_for(request, slug, subset_slug, *READ)
    report = subset.report or {}
    categories = [
        (SuperCategory(c).label if c in SuperCategory.values else c, n)
        for c, n in report.get("super_categories", {}).items()
    ]
    context = {
        "project": subset.project,
        "role": role,
        "subset": subset,
        "report": report,
        "categories": categories,
        "status": queries.subset_status_counts(subset),
        "status_labels": Clip.Status.choices,
        # job pages are researchers' only, so reviewers get no job rows to follow
        "jobs": queries.subset_jobs(subset) if role == Role.RESEARCHER else None,
        "can_fetch": role == Role.RESEARCHER and "clips_fetch" in JOB_KINDS,
    }
    return render(request, "curation/subset_detail.html", context)


@login_required
@require_GET
def subset_chart(request: HttpRequest, slug: str, subset_slug: str) -> HttpResponseBase:
    subset, _ = _subset_for(request, slug, subset_slug, *READ)
    return media_response(request, subset.chart, missing="This subset has no chart.")


@login_required
@require_POST
def subset_fetch(request: HttpRequest, slug: str, subset_slug: str) -> HttpResponse:
    subset, _ = _subset_for(request, slug, subset_slug, *WRITE)
    if "clips_fetch" not in JOB_KINDS:  # fetching arrives with its own job kind
        messages.error(request, "Fetching clips is not available on this server yet.")
        return redirect("subset_detail", slug, subset.slug)
    retry_exhausted = request.POST.get("retry_exhausted") == "1"
    params: dict[str, Any] = {"subset_id": subset.pk}
    if retry_exhausted:
        params["retry_exhausted"] = True
    job = job_enqueue(
        kind="clips_fetch",
        params=params,
        project=subset.project,
        created_by=signed_in_user(request),
        label=f"Fetch clips of {subset.name}",
    )
    job_queued(request, job=job, text=f"Fetching the clips of {subset.name} as {{job}}.")
    return redirect("subset_detail", slug, subset.slug)


# Clips ----------------------------------------------------------------------------------


def _clip_filters(request: HttpRequest, project: Project) -> dict[str, Any]:
    """The clip list's filters from the query string; unknown values are ignored, except
    a subset slug of another project, which is a 404 like its page."""
    get = request.GET
    subset_slug = get.get("subset", "")
    label_key = get.get("label", "").strip()
    return {
        "subset": get_object_or_404(Subset, project=project, slug=subset_slug)
        if subset_slug
        else None,
        "split": get.get("split") if get.get("split") in Split.values else "",
        "status": get.get("status") if get.get("status") in Clip.Status.values else "",
        "label": queries.find_label(label_key) if label_key else None,
        "label_key": label_key,
        "q": get.get("q", "").strip(),
    }


@login_required
@require_GET
def clip_list(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_for_page(request, slug, *READ)
    filters = _clip_filters(request, project)
    label_key = filters.pop("label_key")
    unknown_label = bool(label_key) and filters["label"] is None
    clips = Clip.objects.none() if unknown_label else queries.project_clips(project, **filters)
    page = Paginator(clips.prefetch_related("labels"), CLIPS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    subset = filters["subset"]
    clips_on_page = list(page.object_list)
    splits = queries.clip_splits(subset, clips_on_page) if subset else {}
    context = {
        "project": project,
        "role": role,
        "page": page,
        # (clip, its split in the chosen subset or "") per table row
        "rows": [(clip, splits.get(clip.pk, "")) for clip in clips_on_page],
        "filters": {**filters, "label_key": label_key},
        "unknown_label": unknown_label,
        "subsets": project.subsets.only("name", "slug"),
        "split_choices": Split.choices,
        "status_choices": Clip.Status.choices,
    }
    return render(request, "curation/clip_list.html", context)


@accepts_uploads
@login_required
def clip_import(request: HttpRequest, slug: str) -> HttpResponse:
    """Researchers upload an archive of audio files; a media worker imports it."""
    project, role = project_for_page(request, slug, *WRITE)
    form = ArchiveUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["archive"]
        try:
            stored_name = services.archive_upload_store(upload=upload)
        except ValidationError as exc:
            form.add_error("archive", exc)
        else:
            job = job_enqueue(
                kind="clips_import_archive",
                params={
                    "stored_name": stored_name,
                    "upload_name": upload.name,
                    "subset_name": form.cleaned_data["subset_name"],
                },
                project=project,
                created_by=signed_in_user(request),
                label=f"Import audio from {upload.name}",
            )
            job_queued(request, job=job, text=f"Importing {upload.name} as {{job}}.")
            return redirect(job)
    context = {
        "project": project,
        "role": role,
        "form": form,
        "max_mb": settings.ARCHIVE_UPLOAD_MAX_BYTES // 1024**2,
        "sample_rate": project.get_audio_sample_rate_display(),
    }
    return render(request, "curation/clip_import.html", context, status=400 if form.errors else 200)


@login_required
@require_GET
def clip_audio(request: HttpRequest, slug: str, pk: int) -> HttpResponseBase:
    project, _ = project_for_page(request, slug, *READ)
    clip = queries.project_clip(project, pk)
    return clip_audio_response(request, clip)


@login_required
@require_GET
def clip_video(request: HttpRequest, slug: str, pk: int) -> HttpResponseBase:
    project, _ = project_for_page(request, slug, *READ)
    clip = queries.project_clip(project, pk)
    return media_response(request, clip.video, missing="This clip has no video hint.")
