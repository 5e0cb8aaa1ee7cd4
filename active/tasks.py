from __future__ import annotations

from celery import shared_task


@shared_task(name="active.tasks.retrain_watch")
def retrain_watch() -> list[int]:
    from active.services.retraining import retrain_watch as watch

    return [retrain.pk for retrain in watch()]


@shared_task(name="active.tasks.flags_sweep")
def flags_sweep() -> list[int]:
    from active.services.flags import flags_sweep as sweep

    return [job.pk for job in sweep()]


@shared_task(name="active.tasks.flags_calibrate_sweep")
def flags_calibrate_sweep() -> list[int]:
    from active.services.calibration import flags_calibrate_sweep as sweep

    return [job.pk for job in sweep()]
