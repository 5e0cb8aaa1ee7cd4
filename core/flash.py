"""Messages after an action that queued a job: each names the job with a link to its page,
where the job's progress, result or error shows, so nobody has to look for it on the jobs
list. Only researchers see job pages (core.views); others get the job's number alone."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest
from django.utils.html import format_html

from core.models import Job


def job_queued(request: HttpRequest, *, job: Job, text: str) -> None:
    """Flashes `text` (plain text with one "{job}" where the job goes) as a success."""
    before, after = text.split("{job}")
    if request.user.has_perm("core.view_job"):
        name = format_html('<a href="{}">job #{}</a>', job.get_absolute_url(), job.pk)
    else:
        name = format_html("job #{}", job.pk)
    messages.success(request, format_html("{}{}{}", before, name, after))
