"""Projects and the people in them: creating a project, memberships and invites, the role
check every project page and API call makes, and the country a user declares."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.text import slugify
from django_countries import countries

from core.models import Invite, Membership, Profile, Project, Role


def project_create(
    *,
    name: str,
    created_by: User,
    description: str = "",
    slug: str = "",
    audio_sample_rate: int = 32_000,
) -> Project:
    slug = slug or slugify(name)[:80]
    if not slug:
        raise ValidationError({"name": "The name needs at least one letter or digit."})
    if Project.objects.filter(slug=slug).exists():
        raise ValidationError({"slug": f"A project with the address {slug!r} already exists."})
    with transaction.atomic():
        project = Project(
            name=name,
            slug=slug,
            description=description,
            created_by=created_by,
            audio_sample_rate=audio_sample_rate,
        )
        project.full_clean()
        project.save()
        membership_add(project=project, user=created_by, role=Role.RESEARCHER)
    return project


def membership_add(
    *, project: Project, user: User, role: str, invite: Invite | None = None
) -> Membership:
    """Adds the user to the project, or changes their role there (core.roles keeps the
    user's role groups in step with every membership save)."""
    membership, _ = Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": role, "invite": invite}
    )
    return membership


def invite_create(
    *,
    project: Project,
    created_by: User,
    role: str = Role.ANNOTATOR,
    expires_in_days: int | None = 30,
    max_uses: int | None = None,
) -> Invite:
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    invite = Invite(
        project=project, created_by=created_by, role=role, expires_at=expires_at, max_uses=max_uses
    )
    invite.full_clean()
    invite.save()
    return invite


def invite_revoke(*, invite: Invite) -> None:
    if invite.revoked_at is None:
        invite.revoked_at = timezone.now()
        invite.save(update_fields=["revoked_at"])


def invite_accept(*, token: str, user: User) -> Membership:
    """Joins the user to the invite's project. An existing member keeps their current role:
    an invite link must not be a way to change roles (researchers do that)."""
    with transaction.atomic():
        invite = Invite.objects.select_for_update().select_related("project").get(token=token)
        reason = invite.unusable_reason()
        if reason:
            raise ValidationError(reason)
        existing = Membership.objects.filter(project=invite.project, user=user).first()
        if existing:
            return existing
        invite.uses = F("uses") + 1
        invite.save(update_fields=["uses"])
        return membership_add(project=invite.project, user=user, role=invite.role, invite=invite)


def profile_country_set(*, user: User, country: str, now: datetime | None = None) -> Profile:
    """Stores the country the user declares (an ISO 3166-1 alpha-2 code; "" withdraws
    it). Self-declared, as on MTurk: batches open only to some locales read it."""
    code = country.strip().upper()
    if code and code not in countries:
        raise ValidationError({"country": f"{country!r} is not an ISO 3166 country code."})
    with transaction.atomic():
        profile, _ = Profile.objects.select_for_update().get_or_create(user=user)
        if profile.country != code:
            profile.country = code
            profile.country_declared_at = (now or timezone.now()) if code else None
            profile.save(update_fields=["country", "country_declared_at"])
    return profile


def profile_country(*, user: User) -> str:
    """The user's declared country code, "" when none."""
    profile = Profile.objects.filter(user=user).values_list("country", flat=True).first()
    return str(profile or "")


def require_role(project: Project, user: User | AnonymousUser, *roles: str) -> Role:
    """Raises PermissionDenied unless the user holds one of `roles` on the project."""
    role = project.role_of(user)
    if user.is_staff and role is None:
        return Role.RESEARCHER
    if role is None or (roles and role not in roles):
        raise PermissionDenied("You do not have access to this project.")
    return role
