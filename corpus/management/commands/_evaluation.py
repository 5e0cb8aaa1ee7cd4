"""What the evaluate and human_upper_bound commands share: the --project/--split option,
running the job inline with its progress on stderr, and printing its result."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.models import Job, Project
from core.services import job_run_inline
from corpus.evaluation import ALL_FAMILIES, format_table
from curation.models import Split


def add_common_arguments(parser: CommandParser) -> None:
    parser.add_argument("--project", help="project slug: use the approved captions of --split")
    parser.add_argument(
        "--split", choices=Split.values, help="the project's split (with --project)"
    )
    parser.add_argument(
        "--metrics",
        default=",".join(ALL_FAMILIES),
        help=f"comma-separated metric families (default: {','.join(ALL_FAMILIES)})",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def metrics_option(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(ALL_FAMILIES))
    if unknown or not names:
        raise CommandError(
            f"--metrics: unknown {', '.join(unknown) or '(none given)'}; "
            f"choose from {','.join(ALL_FAMILIES)}."
        )
    return names


def project_option(slug: str) -> Project:
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        known = ", ".join(Project.objects.values_list("slug", flat=True)) or "none"
        raise CommandError(f"No project with slug {slug!r}; projects: {known}.")
    return project


def run(
    command: BaseCommand,
    *,
    kind: str,
    params: dict[str, Any],
    label: str,
    project: Project | None,
    as_json: bool,
) -> dict[str, Any]:
    """Runs the job in this process; progress goes to stderr so --json output stays clean."""

    def echo(line: str) -> None:
        command.stderr.write(line, style_func=str)

    job = job_run_inline(kind=kind, params=params, label=label, project=project, echo=echo)
    if job.state != Job.State.SUCCEEDED:
        raise CommandError(f"job #{job.pk} {job.state}: {job.error}")
    result: dict[str, Any] = job.result
    if as_json:
        command.stdout.write(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        command.stdout.write(format_table(result["scores"], result["unavailable"]))
    return result
