from __future__ import annotations

from django.urls import path

from modeling import views

P = "projects/<slug:slug>/runs/"
R = P + "<int:pk>/"

urlpatterns = [
    path(P, views.run_list, name="run_list"),
    path(R, views.run_detail, name="run_detail"),
    path(R + "curve.svg", views.run_curve, name="run_curve"),
    path(R + "cancel/", views.run_cancel, name="run_cancel"),
    path(R + "resume/", views.run_resume, name="run_resume"),
    path(R + "start-from/", views.run_start_from, name="run_start_from"),
    path(R + "promote/", views.run_promote, name="run_promote"),
    path(R + "suggest/", views.run_suggest, name="run_suggest"),
]
