"""Curation API (mounted on /api/ by earmark.api): recipes, previews and builds, subsets and their
clips, fetching, the shared ontology (read-only) and each project's curation flags.

Access is the pages': a project you are not in is a 404, curation data needs the researcher
or reviewer role (403 for annotators), and changes need the researcher role.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.core.paginator import EmptyPage, Paginator
from django.http import HttpRequest
from django.urls import reverse
from ninja import Body, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status

from core.access import project_for_api, signed_in_user
from core.jobs import JOB_KINDS
from core.models import Membership, Project, Role
from core.schemas import ErrorOut, JobOut
from core.services import job_enqueue
from curation import queries, services
from curation.models import Clip, Label, LabelCuration, Recipe, Split, Subset
from curation.recipes import RecipeError, RecipeSpec

router = Router(tags=["curation"])

READ = (Role.RESEARCHER, Role.REVIEWER)
WRITE = (Role.RESEARCHER,)
MAX_PER_PAGE = 500
# model fields copied as they are into ClipOut and LabelOut
CLIP_FIELDS = (
    "id",
    "source",
    "segment_list",
    "youtube_id",
    "original_name",
    "status",
    "error",
    "duration_seconds",
    "silent",
)
LABEL_FIELDS = ("mid", "name", "description", "abstract", "blacklisted")


class RecipeOut(Schema):
    slug: str
    name: str
    spec: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class RecipeIn(Schema):
    name: str | None = None  # defaults to the current name, or the slug for a new recipe
    spec: dict[str, Any]


class BuildIn(Schema):
    name: str = ""


class LabelCountOut(Schema):
    mid: str
    name: str
    before: int
    after: int


class LabelRuleOut(Schema):
    rule: str
    dropped: int


class ReportOut(Schema):
    candidate_clips: int
    selected_clips: int
    labels_kept: int
    splits: dict[str, int]
    skew_before: float
    skew_after: float
    # AudioCaps' Figure 8 figure over the kept word labels: the candidate lists, the selection
    word_skew_before: float
    word_skew_after: float
    word_labels: str  # the recipe's word_label_set
    labels_considered: int  # labels the candidate clips carry
    label_rules: list[LabelRuleOut]  # labels each rule drops, in the order they apply
    captions_per_clip: dict[str, int]
    super_categories: dict[str, int]
    labels: list[LabelCountOut]


class SpecErrorOut(Schema):
    detail: str
    field: str | None  # the RecipeSpec field the message is about, when it names one


class SubsetOut(Schema):
    slug: str
    name: str
    recipe: str | None
    built_at: datetime
    clips: int
    ready: int


class SubsetDetailOut(SubsetOut):
    spec: dict[str, Any]
    report: dict[str, Any]
    statuses: dict[str, int]
    percent_ready: int


class ClipOut(Schema):
    id: int
    source: str
    segment_list: str
    youtube_id: str
    start_seconds: float
    end_seconds: float
    original_name: str
    status: str
    error: str
    duration_seconds: float | None
    silent: bool
    split: str | None
    labels: list[str]
    audio_url: str | None
    video_url: str | None


class ClipPageOut(Schema):
    count: int
    page: int
    pages: int
    items: list[ClipOut]


class OntologyLabelOut(Schema):
    """A label of the shared AudioSet ontology, as every project sees it."""

    mid: str
    name: str
    description: str
    abstract: bool
    blacklisted: bool
    word_label: str | None
    super_category: str | None  # the word label's own (first) super-category
    super_categories: list[str]  # every one it sits under, its own first
    children: list[str]
    # clips carrying the label itself per AudioSet list (balanced, eval, unbalanced), cached
    clip_counts: dict[str, int]


class LabelOut(OntologyLabelOut):
    """A label with one project's curation of it (all False and "" until it is judged)."""

    needs_visuals: bool
    needs_expertise: bool
    excluded: bool
    curation_note: str


class LabelCurationIn(Schema):
    needs_visuals: bool = False
    needs_expertise: bool = False
    excluded: bool = False
    note: str = ""


# Access ----------------------------------------------------------------------------------


def _recipe(request: HttpRequest, slug: str, recipe_slug: str, *roles: str) -> Recipe:
    project = project_for_api(request, slug, *roles)
    recipe = Recipe.objects.filter(project=project, slug=recipe_slug).first()
    if recipe is None:
        raise HttpError(404, f"No recipe {recipe_slug!r} in project {slug!r}.")
    return recipe


def _subset(request: HttpRequest, slug: str, subset_slug: str, *roles: str) -> Subset:
    project = project_for_api(request, slug, *roles)
    subset = Subset.objects.select_related("recipe").filter(project=project, slug=subset_slug)
    found = subset.first()
    if found is None:
        raise HttpError(404, f"No subset {subset_slug!r} in project {slug!r}.")
    return found


def _spec_error(exc: ValidationError) -> Status:
    message = "; ".join(exc.messages)
    field, _, _ = message.partition(": ")
    known = {f for f in RecipeSpec.__dataclass_fields__}
    return Status(400, {"detail": message, "field": field if field in known else None})


def _recipe_out(recipe: Recipe) -> dict[str, Any]:
    return {
        "slug": recipe.slug,
        "name": recipe.name,
        "spec": recipe.spec,
        "created_at": recipe.created_at,
        "updated_at": recipe.updated_at,
    }


def _subset_out(subset: Subset, counts: dict[int, tuple[int, int]]) -> dict[str, Any]:
    clips, ready = counts.get(subset.pk, (0, 0))
    return {
        "slug": subset.slug,
        "name": subset.name,
        "recipe": subset.recipe.slug if subset.recipe else None,
        "built_at": subset.built_at,
        "clips": clips,
        "ready": ready,
    }


# Recipes --------------------------------------------------------------------------------


@router.get(
    "/projects/{slug}/recipes", response={200: list[RecipeOut], 403: ErrorOut, 404: ErrorOut}
)
def recipe_list(request: HttpRequest, slug: str) -> Any:
    project = project_for_api(request, slug, *READ)
    return [_recipe_out(r) for r in project.recipes.all()]


# Declared before /recipes/{recipe_slug}: Django tries the URL patterns in this order.
@router.post(
    "/projects/{slug}/recipes/preview",
    response={200: ReportOut, 400: SpecErrorOut, 403: ErrorOut, 404: ErrorOut},
)
def recipe_preview(request: HttpRequest, slug: str, spec: Body[dict[str, Any]]) -> Any:
    """What a build of this spec would select now; nothing is stored."""
    project = project_for_api(request, slug, *WRITE)
    try:
        return services.subset_preview(project=project, spec=spec)
    except ValidationError as exc:
        return _spec_error(exc)


@router.get(
    "/projects/{slug}/recipes/{recipe_slug}",
    response={200: RecipeOut, 403: ErrorOut, 404: ErrorOut},
)
def recipe_get(request: HttpRequest, slug: str, recipe_slug: str) -> Any:
    return _recipe_out(_recipe(request, slug, recipe_slug, *READ))


@router.put(
    "/projects/{slug}/recipes/{recipe_slug}",
    response={200: RecipeOut, 201: RecipeOut, 400: SpecErrorOut, 403: ErrorOut, 404: ErrorOut},
)
def recipe_put(request: HttpRequest, slug: str, recipe_slug: str, payload: RecipeIn) -> Any:
    """Creates the recipe at this address (201) or replaces its name and spec (200)."""
    project = project_for_api(request, slug, *WRITE)
    existing = Recipe.objects.filter(project=project, slug=recipe_slug).first()
    try:
        spec = RecipeSpec.from_dict(payload.spec)  # first, so errors start with the field
        recipe = services.recipe_save(
            project=project,
            name=payload.name or (existing.name if existing else recipe_slug),
            spec=spec,
            slug=recipe_slug,
            created_by=existing.created_by if existing else signed_in_user(request),
        )
    except (RecipeError, TypeError) as exc:
        return _spec_error(ValidationError(str(exc)))
    except ValidationError as exc:
        return _spec_error(exc)
    return Status(200 if existing else 201, _recipe_out(recipe))


@router.post(
    "/projects/{slug}/recipes/{recipe_slug}/build",
    response={201: JobOut, 403: ErrorOut, 404: ErrorOut},
)
def recipe_build(
    request: HttpRequest, slug: str, recipe_slug: str, payload: BuildIn | None = None
) -> Any:
    """Queues a "subset_build" job; follow it at /api/jobs/{id}."""
    recipe = _recipe(request, slug, recipe_slug, *WRITE)
    job = job_enqueue(
        kind="subset_build",
        params={"recipe_id": recipe.pk, "name": payload.name.strip() if payload else ""},
        project=recipe.project,
        created_by=signed_in_user(request),
        label=f"Build subset from {recipe.name}",
    )
    return Status(201, job)


# Subsets --------------------------------------------------------------------------------


@router.get(
    "/projects/{slug}/subsets", response={200: list[SubsetOut], 403: ErrorOut, 404: ErrorOut}
)
def subset_list(request: HttpRequest, slug: str) -> Any:
    project = project_for_api(request, slug, *READ)
    subsets = list(project.subsets.select_related("recipe").defer("report", "spec"))
    counts = queries.subset_clip_counts(subsets)
    return [_subset_out(s, counts) for s in subsets]


@router.get(
    "/projects/{slug}/subsets/{subset_slug}",
    response={200: SubsetDetailOut, 403: ErrorOut, 404: ErrorOut},
)
def subset_get(request: HttpRequest, slug: str, subset_slug: str) -> Any:
    subset = _subset(request, slug, subset_slug, *READ)
    status = queries.subset_status_counts(subset)
    return {
        **_subset_out(subset, queries.subset_clip_counts([subset])),
        "spec": subset.spec,
        "report": subset.report,
        "statuses": status["statuses"],
        "percent_ready": status["percent_ready"],
    }


@router.get(
    "/projects/{slug}/subsets/{subset_slug}/clips",
    response={200: ClipPageOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
)
def subset_clips(
    request: HttpRequest,
    slug: str,
    subset_slug: str,
    split: str = "",
    status: str = "",
    page: int = 1,
    per_page: int = 50,
) -> Any:
    subset = _subset(request, slug, subset_slug, *READ)
    if split and split not in Split.values:
        raise HttpError(400, f"split must be one of {', '.join(Split.values)}.")
    if status and status not in Clip.Status.values:
        raise HttpError(400, f"status must be one of {', '.join(Clip.Status.values)}.")
    clips = queries.project_clips(subset.project, subset=subset, split=split, status=status)
    paginator = Paginator(clips.prefetch_related("labels"), max(1, min(per_page, MAX_PER_PAGE)))
    try:
        current = paginator.page(page)
    except EmptyPage:
        raise HttpError(404, f"No page {page}; there are {paginator.num_pages}.") from None
    splits = queries.clip_splits(subset, current.object_list)
    items = [_clip_out(subset.project, clip, splits.get(clip.pk)) for clip in current]
    return {"count": paginator.count, "page": page, "pages": paginator.num_pages, "items": items}


def _clip_out(project: Project, clip: Clip, split: str | None) -> dict[str, Any]:
    args = [project.slug, clip.pk]
    return {
        **{f: getattr(clip, f) for f in CLIP_FIELDS},
        "start_seconds": float(clip.start_seconds),
        "end_seconds": float(clip.end_seconds),
        "split": split,
        "labels": [label.mid for label in clip.labels.all()],
        "audio_url": reverse("clip_audio", args=args) if clip.audio else None,
        "video_url": reverse("clip_video", args=args) if clip.video else None,
    }


@router.post(
    "/projects/{slug}/subsets/{subset_slug}/fetch",
    response={201: JobOut, 403: ErrorOut, 404: ErrorOut, 503: ErrorOut},
)
def subset_fetch(request: HttpRequest, slug: str, subset_slug: str) -> Any:
    """Queues a "clips_fetch" job for the subset's clips; follow it at /api/jobs/{id}."""
    subset = _subset(request, slug, subset_slug, *WRITE)
    if "clips_fetch" not in JOB_KINDS:
        return Status(503, {"detail": "Fetching clips is not available on this server yet."})
    job = job_enqueue(
        kind="clips_fetch",
        params={"subset_id": subset.pk},
        project=subset.project,
        created_by=signed_in_user(request),
        label=f"Fetch clips of {subset.name}",
    )
    return Status(201, job)


# Ontology -------------------------------------------------------------------------------


def _ontology_rows(labels: Any) -> list[dict[str, Any]]:
    children: dict[int, list[str]] = {}
    edges = Label.children.through.objects.order_by("pk")
    for parent, child_mid in edges.values_list("from_label_id", "to_label__mid"):
        children.setdefault(parent, []).append(child_mid)
    counts = queries.label_clip_counts()
    return [
        {
            **{f: getattr(label, f) for f in LABEL_FIELDS},
            "pk": label.pk,
            "word_label": label.word_label.name if label.word_label else None,
            "super_category": label.word_label.super_category if label.word_label else None,
            "super_categories": label.word_label.super_categories if label.word_label else [],
            "children": children.get(label.pk, []),
            "clip_counts": {s: counts.get(label.pk, {}).get(s, 0) for s in queries.SEGMENT_LISTS},
        }
        for label in labels
    ]


def _labels(q: str) -> Any:
    labels = (
        Label.objects.select_related("word_label")
        .prefetch_related("word_label__extra_categories")
        .order_by("pk")
    )
    return labels.filter(name__icontains=q.strip()) if q.strip() else labels


def _curated(row: dict[str, Any], curation: LabelCuration | None) -> dict[str, Any]:
    return {
        **row,
        "needs_visuals": curation.needs_visuals if curation else False,
        "needs_expertise": curation.needs_expertise if curation else False,
        "excluded": curation.excluded if curation else False,
        "curation_note": curation.note if curation else "",
    }


@router.get("/labels", response={200: list[OntologyLabelOut], 403: ErrorOut})
def label_list(request: HttpRequest, q: str = "") -> Any:
    """The shared AudioSet ontology, read-only; `q` filters by name. Each project's curation
    flags are at /api/projects/{slug}/labels."""
    user = signed_in_user(request)
    curator = Membership.objects.filter(user=user, role__in=READ).exists()
    if not (curator or user.is_staff):
        raise HttpError(403, "Only researchers and reviewers see the ontology.")
    return _ontology_rows(_labels(q))


@router.get("/projects/{slug}/labels", response={200: list[LabelOut], 403: ErrorOut, 404: ErrorOut})
def project_label_list(request: HttpRequest, slug: str, q: str = "") -> Any:
    """The ontology with this project's curation flags and notes; `q` filters by name."""
    project = project_for_api(request, slug, *READ)
    curations = services.label_curations(project=project)
    return [_curated(row, curations.get(row["pk"])) for row in _ontology_rows(_labels(q))]


@router.put(
    "/projects/{slug}/labels/{path:mid}",
    response={200: LabelOut, 403: ErrorOut, 404: ErrorOut},
)
def project_label_curate(
    request: HttpRequest, slug: str, mid: str, payload: LabelCurationIn
) -> Any:
    """Sets this project's flags and note for the label with AudioSet id `mid`
    (`…/labels/m/09x0r` or `…/labels//m/09x0r` for /m/09x0r); its recipes exclude labels by
    them. Other projects are not affected."""
    project = project_for_api(request, slug, *WRITE)
    mid = mid if mid.startswith("/") else f"/{mid}"
    label = Label.objects.select_related("word_label").filter(mid=mid).first()
    if label is None:
        raise HttpError(404, f"No AudioSet label {mid!r}.")
    curation = services.label_curate(project=project, label=label, **payload.dict())
    return _curated(_ontology_rows([label])[0], curation)
