from __future__ import annotations

from django.urls import path

from annotation.platforms.prolific import views

urlpatterns = [
    path("prolific/batches/<int:batch_id>/", views.prolific_arrive, name="prolific_arrive"),
    path(
        "prolific/batches/<int:batch_id>/<int:clip_id>/audio",
        views.prolific_clip_audio,
        name="prolific_clip_audio",
    ),
]
