from __future__ import annotations

from django.urls import path

from active import labelstudio, views

P = "projects/<slug:slug>/"
LS = "labelstudio/<slug:slug>/"

urlpatterns = [
    path(P + "active/", views.loop, name="active_loop"),
    path(P + "active/retrain/", views.retrain, name="active_retrain"),
    path(
        P + "active/runs/<int:run_id>/promote-if-better/",
        views.promote_if_better,
        name="active_promote_if_better",
    ),
    path(P + "active/curve/", views.curve, name="active_curve"),
    path(P + "active/flags/refit/", views.flags_calibrate, name="active_flags_calibrate"),
    path(P + "batches/<int:pk>/active/", views.batch_configure, name="active_batch_configure"),
    path(P + "batches/<int:pk>/active/flag/", views.batch_flag, name="active_batch_flag"),
    path(
        P + "batches/<int:pk>/active/labelstudio.zip",
        views.batch_labelstudio,
        name="active_batch_labelstudio",
    ),
    path(
        P + "active/labelstudio/import/",
        views.labelstudio_import,
        name="active_labelstudio_import",
    ),
    path(
        P + "active/labelstudio/rotate/",
        views.labelstudio_rotate,
        name="active_labelstudio_rotate",
    ),
    # Label Studio's ML backend protocol; the base URL to give Label Studio is LS plus the
    # project's webhook secret (LS alone still serves a token holder, webhook included)
    path(LS + "health", labelstudio.health, name="labelstudio_health"),
    path(LS + "setup", labelstudio.setup, name="labelstudio_setup"),
    path(LS + "predict", labelstudio.predict, name="labelstudio_predict"),
    path(LS + "webhook", labelstudio.webhook, name="labelstudio_webhook"),
    path(LS + "versions", labelstudio.versions, name="labelstudio_versions"),
    path(LS + "<str:secret>/health", labelstudio.health, name="labelstudio_secret_health"),
    path(LS + "<str:secret>/setup", labelstudio.setup, name="labelstudio_secret_setup"),
    path(LS + "<str:secret>/predict", labelstudio.predict, name="labelstudio_secret_predict"),
    path(LS + "<str:secret>/webhook", labelstudio.webhook, name="labelstudio_secret_webhook"),
    path(LS + "<str:secret>/versions", labelstudio.versions, name="labelstudio_secret_versions"),
]
