from __future__ import annotations

from annotation.platforms.commands import PublishCommand


class Command(PublishCommand):
    help = (
        "Offer a published batch on MTurk as ExternalQuestion HITs (the endpoint of "
        "MTURK_ENDPOINT_URL, the sandbox by default). Run it again to finish after a failure."
    )
    job_kind = "mturk_publish"
    platform_name = "MTurk"
