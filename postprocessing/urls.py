from __future__ import annotations

from django.urls import path

from postprocessing import views

urlpatterns = [
    path(
        "projects/<slug:slug>/postprocessing/",
        views.overview,
        name="postprocessing_overview",
    ),
    path("projects/<slug:slug>/postprocessing/run/", views.run, name="postprocessing_run"),
    path(
        "projects/<slug:slug>/captions/<int:pk>/processing/",
        views.caption_processing,
        name="caption_processing",
    ),
    path(
        "projects/<slug:slug>/captions/<int:pk>/processing/revert-grammar/",
        views.grammar_revert,
        name="caption_grammar_revert",
    ),
]
