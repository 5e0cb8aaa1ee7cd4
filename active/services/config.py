"""The loop's settings rows, created on first read: a project's (the model a retrain
trains, whether growth starts one) and a batch's (ranking strategy, pre-suggestion mode)."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import User
from django.utils import timezone

from active.models import BatchConfig, ProjectConfig
from annotation.models import Batch
from core.models import Project, Role
from core.services import require_role


def batch_config(*, batch: Batch) -> BatchConfig:
    config, _ = BatchConfig.objects.get_or_create(batch=batch)
    return config


def project_config(*, project: Project) -> ProjectConfig:
    config, _ = ProjectConfig.objects.get_or_create(project=project)
    return config


def project_configure(
    *,
    project: Project,
    user: User,
    model_name: str,
    preset: str = "small",
    overrides: Sequence[str] = (),
    auto_retrain: bool = False,
) -> ProjectConfig:
    """Sets the model the loop retrains (checked as `train` would check it)."""
    require_role(project, user, Role.RESEARCHER)
    from modeling.planning import run_spec

    run_spec(model_name=model_name, preset=preset, overrides=overrides)  # ValidationError
    config = project_config(project=project)
    config.model_name, config.preset = model_name, preset
    config.overrides, config.auto_retrain = list(overrides), auto_retrain
    config.updated_at = timezone.now()
    config.save()
    return config
