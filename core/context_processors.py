from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from core.models import Membership, Role


def roles(request: HttpRequest) -> dict[str, Any]:
    user = request.user
    if not user.is_authenticated:
        return {}
    user_roles = set(Membership.objects.filter(user=user).values_list("role", flat=True))
    is_researcher = user.is_staff or Role.RESEARCHER in user_roles
    return {
        "is_researcher": is_researcher,
        "is_reviewer": Role.REVIEWER in user_roles,
        "is_annotator": Role.ANNOTATOR in user_roles,
        # core.access.annotates_only, from the roles read here (one query a page)
        "annotates_only": not is_researcher and user_roles == {Role.ANNOTATOR},
    }
