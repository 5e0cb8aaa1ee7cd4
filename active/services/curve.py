"""The learning curve: validation score against captions, live points from each retrain
and simulated ones imported from benchmarks/active_learning.py."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from active.models import CurvePoint, Strategy
from active.services.retraining import METRIC
from core.models import Project, Role
from core.services import require_role


def curve_series(*, project: Project) -> list[dict[str, Any]]:
    """The project's learning-curve points grouped into series (source, label, strategy),
    each a list of {captions, value, round, run} in caption order."""
    series: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in CurvePoint.objects.filter(project=project).order_by("captions", "pk"):
        series[(p.source, p.label, p.strategy)].append(
            {"captions": p.captions, "value": p.value, "round": p.round, "run": p.run_id,
             "metric": p.metric}
        )  # fmt: skip
    return [
        {"source": source, "label": label, "strategy": strategy, "points": points}
        for (source, label, strategy), points in sorted(series.items())
    ]


def curve_import(*, project: Project, user: User | None, data: dict[str, Any]) -> int:
    """Imports a simulation's curves (benchmarks/active_learning.py --json) as points:
    {"label": str, "metric": "CIDEr-D", "curves": {strategy: [{"round", "captions",
    "value"}, …]}}. Replaces earlier points of the same label; nothing is written when a
    point is malformed. `user` None is a trusted caller (the management command)."""
    if user is not None:
        require_role(project, user, Role.RESEARCHER)
    label = str(data.get("label") or "").strip()[:200]
    curves = data.get("curves")
    if not label or not isinstance(curves, dict) or not curves:
        raise ValidationError('Expected {"label": …, "curves": {strategy: [points]}}.')
    rows = []
    for strategy, points in curves.items():
        if strategy not in Strategy.values:
            raise ValidationError(f"Unknown strategy {strategy!r} in curves.")
        if not isinstance(points, list):
            raise ValidationError(f"curves[{strategy!r}] is not a list of points.")
        for i, point in enumerate(points):
            try:
                captions, value = int(point["captions"]), float(point["value"])
                number = int(point.get("round", i))
            except (KeyError, TypeError, ValueError):
                raise ValidationError(
                    f"curves[{strategy!r}][{i}] needs integer captions and a numeric value."
                ) from None
            if captions < 0 or number < 0:
                raise ValidationError(f"curves[{strategy!r}][{i}] has a negative number.")
            rows.append(
                CurvePoint(
                    project=project,
                    source=CurvePoint.Source.SIMULATION,
                    strategy=strategy,
                    label=label,
                    round=number,
                    captions=captions,
                    metric=str(data.get("metric") or METRIC)[:20],
                    value=value,
                )
            )
    with transaction.atomic():
        CurvePoint.objects.filter(
            project=project, source=CurvePoint.Source.SIMULATION, label=label
        ).delete()
        CurvePoint.objects.bulk_create(rows)
    return len(rows)
