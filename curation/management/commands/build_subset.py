from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser

from core.management.base import JobCommand
from core.models import Project
from curation.models import Recipe
from curation.services import recipe_import


class Command(JobCommand):
    help = (
        "Build a subset from a recipe: a recipe slug of the project, or a .toml/.json file "
        "(imported into the project first, replacing a recipe of the same name)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("recipe", help="recipe slug, or path to a .toml/.json recipe")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--name", default="", help="name of the new subset")

    def handle(self, *args: Any, recipe: str, project: str, name: str, **options: Any) -> None:
        try:
            target = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f"No project with slug {project!r}.") from None
        path = Path(recipe)
        found: Recipe | None
        if path.suffix.lower() in (".toml", ".json"):
            try:
                found = recipe_import(project=target, path=path)
            except ValidationError as exc:
                raise CommandError("; ".join(exc.messages)) from None
        else:
            found = Recipe.objects.filter(project=target, slug=recipe).first()
            if found is None:
                known = ", ".join(target.recipes.values_list("slug", flat=True)) or "none"
                raise CommandError(f"No recipe {recipe!r} in {project}; known: {known}.")
        self.run_job(
            kind="subset_build",
            params={"recipe_id": found.pk, "name": name},
            label=f"Build subset from {found.name}",
            project=target,
        )
