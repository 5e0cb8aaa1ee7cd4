"""MTurk mode: a published batch offered on Amazon Mechanical Turk as ExternalQuestion HITs.

Each local HIT becomes one MTurk HIT (same MaxAssignments) whose question is this site's
page /mturk/hits/<hit id>/ (views.py, checks in page.py). MTurk decides who works on which
HIT, so a batch on MTurk (Batch.platform) is no longer offered by the local engine
(hit_claim). An MTurk worker becomes a local user and an annotator of the project
(workers.py), so review, blocks and worker pages work unchanged. The review's decisions go
back with mturk_reviews_send (reviews.py), which MTurk's own payment follows; assignments
returned or abandoned on MTurk give their local slot back through mturk_returns_sync.
Qualification tests a batch requires become MTurk qualification types (publish.py,
qualifications.py). MTurk's ids for Earmark's rows are annotation.PlatformRef rows.

The API is reached with boto3 at settings.MTURK_ENDPOINT_URL, the requester sandbox
unless configured otherwise; credentials are boto3's usual (AWS_ACCESS_KEY_ID, …).

Modules: client (boto3, ids), publish, workers, page, reviews, qualifications, views,
urls, platform (the annotation.platforms interface).
"""

from __future__ import annotations

from annotation.platforms.mturk.client import (
    MTurkUnconfirmed,
    TooManyRequests,
    assignment_mturk_id,
    hit_mturk_id,
    hit_type_id,
    mturk_client,
)
from annotation.platforms.mturk.page import PREVIEW
from annotation.platforms.mturk.publish import batch_mturk_publish
from annotation.platforms.mturk.reviews import mturk_returns_sync, mturk_reviews_send

__all__ = [
    "PREVIEW",
    "MTurkUnconfirmed",
    "TooManyRequests",
    "assignment_mturk_id",
    "batch_mturk_publish",
    "hit_mturk_id",
    "hit_type_id",
    "mturk_client",
    "mturk_returns_sync",
    "mturk_reviews_send",
]
