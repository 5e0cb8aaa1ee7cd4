"""MTurk workers as local accounts, and local blocks mirrored on MTurk.

An MTurk worker becomes a local user (an MTurkWorker row holds their WorkerId; the account
is named "mturk-<WorkerId>", a prefix reserved to the site) and an annotator of the
project, so review, blocks and worker pages work unchanged.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from annotation.models import MTurkWorker
from core.models import Membership, Project, Role
from core.services import membership_add
from core.usernames import MTURK_PREFIX

USERNAME_PREFIX = MTURK_PREFIX  # a label only: identity is MTurkWorker.worker_id


def worker_id_checked(worker_id: str) -> str:
    if not (worker_id.isalnum() and 1 <= len(worker_id) <= 64):
        raise ValidationError(f"workerId {worker_id!r} is not an MTurk worker id.")
    return worker_id


def mturk_worker_user(*, worker_id: str) -> User | None:
    """The local account of the MTurk worker, if they have one: found by the worker id
    kept in MTurkWorker, never by a username."""
    found = MTurkWorker.objects.select_related("user").filter(worker_id=worker_id).first()
    return found.user if found is not None else None


def mturk_worker(*, worker_id: str, project: Project) -> User:
    """The local user standing for an MTurk worker, an annotator of the project; made on
    their first assignment, named `mturk-<WorkerId>` (a reserved prefix no sign-up form
    accepts), or `mturk-<WorkerId>-<n>` where an older account holds that name."""
    worker_id_checked(worker_id)
    user = mturk_worker_user(worker_id=worker_id)
    if user is None:
        try:
            with transaction.atomic():
                user = User.objects.create_user(
                    username=_free_username(USERNAME_PREFIX + worker_id), password=None
                )
                MTurkWorker.objects.create(user=user, worker_id=worker_id)
        except IntegrityError:  # the same worker's other request made it meanwhile
            user = mturk_worker_user(worker_id=worker_id)
            if user is None:
                raise
    if not Membership.objects.filter(project=project, user=user).exists():
        membership_add(project=project, user=user, role=Role.ANNOTATOR)
    return user


def _free_username(wanted: str) -> str:
    users = User.objects
    name, n = wanted, 1
    while users.filter(username__iexact=name).exists():
        n += 1
        name = f"{wanted}-{n}"
    return name
