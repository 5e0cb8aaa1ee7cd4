from __future__ import annotations

from django.urls import path

from core import views

urlpatterns = [
    path("", views.home, name="home"),
    path("projects/new/", views.project_new, name="project_new"),
    path("projects/<slug:slug>/", views.project_detail, name="project_detail"),
    path("projects/<slug:slug>/invites/", views.invite_new, name="invite_new"),
    path(
        "projects/<slug:slug>/invites/<int:pk>/revoke/", views.invite_revoke, name="invite_revoke"
    ),
    path("invite/<str:token>/", views.invite_accept, name="invite_accept"),
    path("jobs/", views.job_list, name="job_list"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/retry/", views.job_retry, name="job_retry"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    path("account/", views.account, name="account"),
    path("account/tokens/", views.token_list, name="token_list"),
    path("account/tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
    path("healthz", views.healthz, name="healthz"),
]
