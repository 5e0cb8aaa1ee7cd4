from __future__ import annotations

from django.core.management.base import CommandError

from core.models import Project


def project_option(slug: str | None) -> Project:
    """The project named by --project; without it, the only project there is."""
    if slug:
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            known = ", ".join(Project.objects.values_list("slug", flat=True)) or "none"
            raise CommandError(f"No project with slug {slug!r}; projects: {known}.")
        return project
    projects = list(Project.objects.all()[:2])
    if len(projects) == 1:
        return projects[0]
    if not projects:
        raise CommandError("There is no project yet; create one first (the home page).")
    known = ", ".join(Project.objects.values_list("slug", flat=True))
    raise CommandError(f"Several projects exist; name one with --project ({known}).")
