from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from core.views import LoginView
from earmark.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("core.urls")),
    path("", include("annotation.urls")),
    path("", include("annotation.platforms.mturk.urls")),  # the ExternalQuestion page MTurk frames
    path("", include("annotation.platforms.prolific.urls")),  # the page Prolific sends to
    path("", include("curation.urls")),
    path("", include("crowd.urls")),
    path("", include("postprocessing.urls")),
    path("", include("corpus.urls")),
    path("", include("modeling.urls")),
    path("", include("active.urls")),
]
