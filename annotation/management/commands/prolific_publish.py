from __future__ import annotations

from annotation.platforms.commands import PublishCommand


class Command(PublishCommand):
    help = (
        "Offer a published batch on Prolific as one study (places: its HITs times "
        "their overlap; the reward checked against Prolific's minimum hourly rate). Run it "
        "again to finish after a failure."
    )
    job_kind = "prolific_publish"
    platform_name = "Prolific"
