from __future__ import annotations

from django.urls import path

from curation import views

P = "projects/<slug:slug>/"
R = P + "recipes/<slug:recipe_slug>/"
S = P + "subsets/<slug:subset_slug>/"

# "new" and "import" come before <recipe_slug>; recipe_save reserves those slugs.
urlpatterns = [
    path(P + "ontology/", views.ontology, name="ontology"),
    path(P + "ontology/<int:pk>/curate/", views.label_curate, name="label_curate"),
    path(P + "ontology/audiocaps-flags/", views.label_flags_apply, name="label_flags_apply"),
    # site-wide: the word labels are the shared ontology's, so staff import them
    path(
        "ontology/audiocaps-word-labels/",
        views.word_labels_import_audiocaps,
        name="word_labels_import_audiocaps",
    ),
    path(P + "recipes/", views.recipe_list, name="recipe_list"),
    path(P + "recipes/new/", views.recipe_new, name="recipe_new"),
    path(P + "recipes/import/", views.recipe_import, name="recipe_import"),
    path(R, views.recipe_detail, name="recipe_detail"),
    path(R + "export.<str:fmt>", views.recipe_export, name="recipe_export"),
    path(R + "import/", views.recipe_upload, name="recipe_upload"),
    path(R + "build/", views.recipe_build, name="recipe_build"),
    path(P + "subsets/", views.subset_list, name="subset_list"),
    path(S, views.subset_detail, name="subset_detail"),
    path(S + "chart.png", views.subset_chart, name="subset_chart"),
    path(S + "fetch/", views.subset_fetch, name="subset_fetch"),
    path(P + "clips/", views.clip_list, name="clip_list"),
    path(P + "clips/import/", views.clip_import, name="clip_import"),
    path(P + "clips/<int:pk>/audio", views.clip_audio, name="clip_audio"),
    path(P + "clips/<int:pk>/video", views.clip_video, name="clip_video"),
]
