from __future__ import annotations

from django.urls import path

from annotation import views

urlpatterns = [
    path("work/", views.work, name="work"),
    path("work/claim/", views.work_claim, name="work_claim"),
    path("work/done/", views.work_done, name="work_done"),
    path("work/assignments/<int:pk>/", views.assignment_detail, name="assignment_detail"),
    path("work/assignments/<int:pk>/submit/", views.assignment_submit, name="assignment_submit"),
    path("work/assignments/<int:pk>/return/", views.assignment_return, name="assignment_return"),
    path(
        "work/assignments/<int:pk>/clips/<int:clip_id>/audio",
        views.assignment_clip_audio,
        name="assignment_clip_audio",
    ),
    path(
        "work/assignments/<int:pk>/clips/<int:clip_id>/heard",
        views.assignment_clip_heard,
        name="assignment_clip_heard",
    ),
    path(
        "work/assignments/<int:pk>/clips/<int:clip_id>/video-hint",
        views.assignment_video_hint,
        name="assignment_video_hint",
    ),
    path(
        "work/assignments/<int:pk>/clips/<int:clip_id>/video",
        views.assignment_clip_video,
        name="assignment_clip_video",
    ),
    path("work/assignments/<int:pk>/report/", views.assignment_report, name="assignment_report"),
    path("projects/<slug:slug>/batches/", views.batch_list, name="batch_list"),
    path("projects/<slug:slug>/batches/<int:pk>/", views.batch_detail, name="batch_detail"),
    path("projects/<slug:slug>/batches/<int:pk>/state/", views.batch_state, name="batch_state"),
    path(
        "projects/<slug:slug>/batches/<int:pk>/publish/<slug:platform>/",
        views.batch_platform_publish,
        name="batch_platform_publish",
    ),
]
