"""Label Studio, the workflows behind the ML-backend endpoints (active/labelstudio.py): the
per-project secret in the backend URL that authenticates Label Studio's webhook."""

from __future__ import annotations

import hmac

from django.contrib.auth.models import User
from django.utils import timezone

from active.models import ProjectConfig, new_labelstudio_secret
from active.services.config import project_config
from core.models import Project, Role
from core.services import require_role


def labelstudio_secret_matches(*, project: Project, secret: str) -> bool:
    """Whether `secret` is the project's current webhook secret (constant-time compare)."""
    expected = project_config(project=project).labelstudio_secret
    return hmac.compare_digest(expected.encode(), secret.encode())


def labelstudio_secret_rotate(*, project: Project, user: User) -> ProjectConfig:
    """A new webhook secret for the project: backend URLs holding the old one stop
    working (Label Studio must be given the new URL)."""
    require_role(project, user, Role.RESEARCHER)
    config = project_config(project=project)
    config.labelstudio_secret = new_labelstudio_secret()
    config.updated_at = timezone.now()
    config.save(update_fields=["labelstudio_secret", "updated_at"])
    return config
