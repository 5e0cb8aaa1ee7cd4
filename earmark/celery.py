"""The one Celery app. Queues: default, media (downloads, ffmpeg), text (post-processing),
gpu (training; run it with a solo pool, one job per GPU).

Keep torch out of import time here and in every tasks module: a prefork worker hangs if
its parent ran a torch op before forking.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "earmark.settings")

app = Celery("earmark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
