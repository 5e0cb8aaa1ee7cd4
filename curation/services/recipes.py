"""Recipes as stored objects and files: saving a project's recipe, and reading, checking
and writing recipe files (TOML or JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.utils.text import slugify

from core.models import Project
from curation.models import Recipe
from curation.recipes import RecipeError, RecipeSpec, recipe_from_text, spec_to_text

# Page and API addresses live beside recipe slugs (/recipes/import/, /recipes/preview).
RESERVED_RECIPE_SLUGS = frozenset({"new", "import", "preview"})
RECIPE_FILE_MAX_BYTES = 64 * 1024  # a recipe is a few hundred bytes; anything big is a mistake


def recipe_save(
    *,
    project: Project,
    name: str,
    spec: RecipeSpec | dict[str, Any],
    created_by: User | None = None,
    slug: str = "",
) -> Recipe:
    """Creates the project's recipe with this slug, or replaces its spec."""
    try:
        spec = spec if isinstance(spec, RecipeSpec) else RecipeSpec.from_dict(spec)
        spec.validate()
    except (RecipeError, TypeError) as exc:
        raise ValidationError(f"Recipe {name!r}: {exc}") from None
    slug = slug or slugify(name)[:80]
    if not slug:
        raise ValidationError(f"Recipe {name!r}: the name needs at least one letter or digit.")
    if slug in RESERVED_RECIPE_SLUGS:
        raise ValidationError(
            f"Recipe {name!r}: {slug!r} is a reserved address; pick another name."
        )
    recipe, _ = Recipe.objects.update_or_create(
        project=project,
        slug=slug,
        defaults={"name": name, "spec": spec.to_dict(), "created_by": created_by},
    )
    return recipe


def recipe_import(*, project: Project, path: Path, created_by: User | None = None) -> Recipe:
    """Reads a recipe from a .toml or .json file; its `name` field (or the file name) names it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"{path}: cannot read ({exc.strerror})") from None
    spec, name = recipe_parse(filename=path.name, data=data)
    return recipe_save(project=project, name=name, spec=spec, created_by=created_by)


def recipe_parse(*, filename: str, data: bytes) -> tuple[RecipeSpec, str]:
    """Checks an uploaded or local recipe file: extension, size, encoding, then the spec.
    Returns the spec and the name it gives itself (else the file's stem)."""
    fmt = Path(filename).suffix.lower().lstrip(".")
    if fmt not in ("toml", "json"):
        raise ValidationError(f"{filename}: a recipe file ends in .toml or .json")
    if len(data) > RECIPE_FILE_MAX_BYTES:
        raise ValidationError(
            f"{filename}: {len(data):,} bytes; a recipe file may hold at most "
            f"{RECIPE_FILE_MAX_BYTES // 1024} KB"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValidationError(f"{filename}: not UTF-8 text") from None
    try:
        spec, name = recipe_from_text(text, fmt=fmt)
    except (RecipeError, TypeError) as exc:
        raise ValidationError(f"{filename}: {exc}") from None
    return spec, name or Path(filename).stem


def recipe_export(*, recipe: Recipe, fmt: str) -> str:
    return spec_to_text(RecipeSpec.from_dict(recipe.spec), fmt=fmt, name=recipe.name)
