from __future__ import annotations

from django.urls import path

from annotation import views

urlpatterns = [
    path("work/", views.work, name="work"),
    path("work/claim/", views.work_claim, name="work_claim"),
    path("work/assignments/<int:pk>/", views.assignment_detail, name="assignment_detail"),
    path("work/assignments/<int:pk>/submit/", views.assignment_submit, name="assignment_submit"),
    path("work/assignments/<int:pk>/return/", views.assignment_return, name="assignment_return"),
    path(
        "work/assignments/<int:pk>/clips/<int:clip_id>/audio",
        views.assignment_clip_audio,
        name="assignment_clip_audio",
    ),
    path("projects/<slug:slug>/batches/", views.batch_list, name="batch_list"),
    path("projects/<slug:slug>/batches/<int:pk>/", views.batch_detail, name="batch_detail"),
    path("projects/<slug:slug>/batches/<int:pk>/state/", views.batch_state, name="batch_state"),
]
