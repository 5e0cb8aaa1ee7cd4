"""Core workflows, one module each: projects and the people in them (`projects`: creating a
project, memberships, invites, the role check, a user's declared country), API tokens
(`api_tokens`) and the life of a job (`job_lifecycle`: creating, dispatching, running under
a lease with `Progress`, retrying, cancelling, and the sweeps for lost jobs) and what the
supervisor of `bin/earmark up` records (`stack`). The registry
of job kinds (handler and queue of each) is `core.jobs`, not a service.

Every public name is re-exported here, so `from core.services import X` works. A test that
replaces a name patches the module that looks it up: a private helper where it is used
(e.g. `core.services.job_lifecycle._pid_alive`), a public one where its caller finds it
(`core.tasks` imports its sweeps from `core.services` when it runs them)."""

from __future__ import annotations

from core.services.api_tokens import (
    TOKEN_TOUCH_INTERVAL,
    TokenHolder,
    api_token_authenticate,
    api_token_create,
    api_token_revoke,
)
from core.services.job_lifecycle import (
    JobCancelled,
    JobLost,
    JobTerminated,
    Progress,
    job_cancel,
    job_create,
    job_dispatch,
    job_enqueue,
    job_retry,
    job_run,
    job_run_inline,
    jobs_fail_lost,
    jobs_recover_restarted,
    jobs_redispatch,
    stop_on_sigterm,
)
from core.services.projects import (
    invite_accept,
    invite_create,
    invite_revoke,
    membership_add,
    profile_country,
    profile_country_set,
    project_create,
    require_role,
)
from core.services.stack import process_exit_record

__all__ = [
    "TOKEN_TOUCH_INTERVAL",
    "JobCancelled",
    "JobLost",
    "JobTerminated",
    "Progress",
    "TokenHolder",
    "api_token_authenticate",
    "api_token_create",
    "api_token_revoke",
    "invite_accept",
    "invite_create",
    "invite_revoke",
    "job_cancel",
    "job_create",
    "job_dispatch",
    "job_enqueue",
    "job_retry",
    "job_run",
    "job_run_inline",
    "jobs_fail_lost",
    "jobs_recover_restarted",
    "jobs_redispatch",
    "membership_add",
    "process_exit_record",
    "profile_country",
    "profile_country_set",
    "project_create",
    "require_role",
    "stop_on_sigterm",
]
