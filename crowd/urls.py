from __future__ import annotations

from django.urls import path

from crowd import views

P = "projects/<slug:slug>/"
W = P + "workers/<int:user_id>/"
Q = P + "qualifications/"

urlpatterns = [
    path(P + "review/", views.review_queue, name="review_queue"),
    path(P + "review/<int:pk>/approve/", views.review_approve, name="review_approve"),
    path(P + "review/<int:pk>/reject/", views.review_reject, name="review_reject"),
    path(P + "review/<int:pk>/fix/", views.review_fix, name="review_fix"),
    path(
        P + "review/imported/<int:pk>/<str:decision>/",
        views.review_imported,
        name="review_imported",
    ),
    path(P + "workers/", views.worker_list, name="worker_list"),
    path(W, views.worker_detail, name="worker_detail"),
    path(W + "approve-all/", views.worker_approve_all, name="worker_approve_all"),
    path(W + "block/", views.worker_block, name="worker_block"),
    path(W + "unblock/", views.worker_unblock, name="worker_unblock"),
    path(W + "bonus/", views.worker_bonus, name="worker_bonus"),
    path(P + "ledger/", views.ledger, name="ledger"),
    path(P + "ledger.csv", views.ledger_csv, name="ledger_csv"),
    path(Q, views.qualification_list, name="qualification_list"),
    path(Q + "<int:pk>/", views.qualification_detail, name="qualification_detail"),
    path(Q + "attempts/<int:pk>/", views.attempt_detail, name="attempt_detail"),
    path(Q + "attempts/<int:pk>/grade/", views.attempt_grade, name="attempt_grade"),
    path(P + "batches/<int:pk>/requirements/", views.batch_requirements, name="batch_requirements"),
    path("work/qualifications/", views.my_qualifications, name="my_qualifications"),
    path("work/qualifications/<int:pk>/", views.qualification_take, name="qualification_take"),
    path(
        "work/qualifications/<int:pk>/clips/<int:clip_id>/audio",
        views.qualification_clip_audio,
        name="qualification_clip_audio",
    ),
    path("work/earnings/", views.my_earnings, name="my_earnings"),
    path("work/blocked/", views.work_blocked, name="work_blocked"),
]
