from __future__ import annotations

from celery import shared_task


@shared_task(name="postprocessing.tasks.captions_postprocess", ignore_result=True)
def captions_postprocess(caption_ids: list[int]) -> None:
    """Post-processes freshly approved captions (queued on `text` by the approval)."""
    from postprocessing.services import captions_postprocess as postprocess

    postprocess(caption_ids=caption_ids)
