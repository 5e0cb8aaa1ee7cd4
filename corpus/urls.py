from __future__ import annotations

from django.urls import path

from corpus import views

P = "projects/<slug:slug>/"
S = P + "snapshots/<int:version>/"

urlpatterns = [
    path(P + "snapshots/", views.snapshot_list, name="snapshot_list"),
    path(P + "snapshots/new/", views.snapshot_new, name="snapshot_new"),
    path(S, views.snapshot_detail, name="snapshot_detail"),
    path(S + "download/", views.snapshot_download, name="snapshot_download"),
    path(S + "files/<path:name>", views.snapshot_file, name="snapshot_file"),
    path(P + "statistics/", views.statistics, name="corpus_statistics"),
    path(P + "statistics/compute/", views.statistics_compute, name="corpus_statistics_compute"),
    path(
        P + "statistics/<int:pk>/<str:kind>.png",
        views.statistics_chart,
        name="corpus_statistics_chart",
    ),
]
