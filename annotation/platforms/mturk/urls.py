from __future__ import annotations

from django.urls import path

from annotation.platforms.mturk import views as mturk_views

urlpatterns = [
    path("mturk/hits/<int:hit_id>/", mturk_views.mturk_hit, name="mturk_hit"),
    path(
        "mturk/hits/<int:hit_id>/<int:clip_id>/audio",
        mturk_views.mturk_clip_audio,
        name="mturk_clip_audio",
    ),
    path(
        "mturk/qualifications/<int:qualification_id>/<int:clip_id>/audio",
        mturk_views.mturk_qualification_audio,
        name="mturk_qualification_audio",
    ),
]
